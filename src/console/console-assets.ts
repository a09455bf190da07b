/**
 * The console's built files (dist-console/, made by scripts/build-console.mjs
 * from console/): read once, served from memory by name. Only files that are
 * there are served, so no request path can reach anything else on disk.
 */
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Injectable } from '@nestjs/common';

/** dist-console/ beside src/ and dist/: the same path from src/console/ (tests) and dist/console/ (the build). */
export const CONSOLE_DIST = fileURLToPath(new URL('../../dist-console/', import.meta.url));

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.map': 'application/json; charset=utf-8',
};

export interface ConsoleFile {
  body: Buffer;
  type: string;
  etag: string;
}

@Injectable()
export class ConsoleAssets {
  private files: Map<string, ConsoleFile> | undefined;
  private readonly dir = CONSOLE_DIST;

  /** The built file `name` (a plain file name, no folders), or undefined. */
  get(name: string): ConsoleFile | undefined {
    return this.load().get(name);
  }

  /** False when the console has not been built (dist-console/ is missing). */
  get built(): boolean {
    return this.load().has('index.html');
  }

  private load(): Map<string, ConsoleFile> {
    if (this.files?.has('index.html')) return this.files;
    const files = new Map<string, ConsoleFile>();
    if (existsSync(this.dir)) {
      for (const entry of readdirSync(this.dir, { withFileTypes: true })) {
        const type = TYPES[extname(entry.name)];
        if (!entry.isFile() || type === undefined) continue;
        const body = readFileSync(join(this.dir, entry.name));
        files.set(entry.name, { body, type, etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"` });
      }
    }
    this.files = files;
    return files;
  }
}
