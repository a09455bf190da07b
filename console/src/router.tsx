/**
 * Routing in the browser: every page has its own address under /console
 * (the engine answers each with the same page), links change the address
 * without a reload, and Back and Forward work.
 */
import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';

export interface Location {
  path: string;
  query: URLSearchParams;
}

const current = (): Location => ({ path: window.location.pathname.replace(/\/+$/, '') || '/', query: new URLSearchParams(window.location.search) });
const listeners = new Set<() => void>();

export function navigate(to: string, { replace = false } = {}): void {
  if (replace) window.history.replaceState(null, '', to);
  else window.history.pushState(null, '', to);
  for (const listener of listeners) listener();
}

export function useLocation(): Location {
  const [location, setLocation] = useState(current);
  useEffect(() => {
    const update = () => setLocation(current());
    listeners.add(update);
    window.addEventListener('popstate', update);
    return () => {
      listeners.delete(update);
      window.removeEventListener('popstate', update);
    };
  }, []);
  return location;
}

/** `/console/events/:id` against a path: the parameters, decoded, or undefined. */
export function match(pattern: string, path: string): Record<string, string> | undefined {
  const want = pattern.split('/');
  const got = path.split('/');
  if (want.length !== got.length) return undefined;
  const params: Record<string, string> = {};
  for (let i = 0; i < want.length; i++) {
    if (want[i].startsWith(':')) {
      try {
        params[want[i].slice(1)] = decodeURIComponent(got[i]);
      } catch {
        return undefined;
      }
    } else if (want[i] !== got[i]) return undefined;
  }
  return params;
}

/** An internal link: a real `<a href>` (open in a new tab works), followed without a reload. */
export function Link({ href, children, class: className, 'aria-current': current }: { href: string; children: ComponentChildren; class?: string; 'aria-current'?: 'page' }) {
  const onClick = (e: MouseEvent) => {
    if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    e.preventDefault();
    navigate(href);
  };
  return (
    <a href={href} class={className} aria-current={current} onClick={onClick}>
      {children}
    </a>
  );
}

/** Console paths, built in one place so that ids from event data are always encoded. */
export const to = {
  overview: () => '/console',
  events: (query = '') => `/console/events${query}`,
  event: (id: string) => `/console/events/${encodeURIComponent(id)}`,
  rules: () => '/console/rules',
  newRule: () => '/console/rules/new',
  rule: (id: string) => `/console/rules/${encodeURIComponent(id)}`,
  failed: () => '/console/failed',
};
