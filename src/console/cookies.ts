/**
 * The few cookie rules the console needs, written out rather than pulled in as
 * a middleware: read one cookie from a request's `Cookie` header, and write the
 * session cookie with the attributes that keep it away from scripts (HttpOnly)
 * and from other sites' requests (SameSite=Strict).
 */

/** The value of cookie `name` in a `Cookie` header, or undefined. */
export function readCookie(header: string | undefined, name: string): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    if (part.slice(0, eq).trim() !== name) continue;
    const raw = part.slice(eq + 1).trim();
    const unquoted = raw.length >= 2 && raw.startsWith('"') && raw.endsWith('"') ? raw.slice(1, -1) : raw;
    try {
      return decodeURIComponent(unquoted);
    } catch {
      return undefined;
    }
  }
  return undefined;
}

export interface SessionCookieOptions {
  /** Only over HTTPS (when the request came over HTTPS). */
  secure: boolean;
  /** Seconds until the browser drops it; 0 deletes it now. Absent: it ends with the browser session. */
  maxAgeSeconds?: number;
}

/** A `Set-Cookie` value: HttpOnly, SameSite=Strict, Path=/ (the console's pages and the admin API it calls). */
export function sessionCookie(name: string, value: string, options: SessionCookieOptions): string {
  const parts = [`${name}=${encodeURIComponent(value)}`, 'Path=/', 'HttpOnly', 'SameSite=Strict'];
  if (options.secure) parts.push('Secure');
  if (options.maxAgeSeconds !== undefined) parts.push(`Max-Age=${options.maxAgeSeconds}`);
  return parts.join('; ');
}
