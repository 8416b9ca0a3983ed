/**
 * tokenlease as users run it: the built package (dist/, through the package's own `exports`), not
 * src/ transpiled on the fly by tsx. tsx keeps function names by wrapping closures in a `__name()`
 * call, and the lease-hit path creates closures per decision: run from src/ it measured about 40 %
 * slower, so the benches would report tsx, not tokenlease. `npm run bench` builds first.
 */
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type * as Tokenlease from '../src/index.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));

/** Newest modification time of the files under `dir`; 0 when it does not exist. */
function newestMtime(dir: string): number {
  let latest = 0;
  try {
    for (const e of readdirSync(dir, { recursive: true, withFileTypes: true })) {
      if (e.isFile()) latest = Math.max(latest, statSync(join(e.parentPath, e.name)).mtimeMs);
    }
  } catch {
    return 0;
  }
  return latest;
}

if (newestMtime(join(ROOT, 'dist')) < newestMtime(join(ROOT, 'src'))) {
  throw new Error('dist/ is missing or older than src/: run `npm run build` first (`npm run bench` does)');
}

// A string variable, so TypeScript takes the types from src/ rather than resolving the package.
const packageName: string = 'tokenlease';
const built = (await import(packageName)) as typeof Tokenlease;

/** One of the package's entry points (`'prometheus'`, `'http'`, `'express'`, `'fastify'`), built. */
export function entryPoint<T>(subpath: string): Promise<T> {
  return import(`${packageName}/${subpath}`) as Promise<T>;
}

export const { Limiter, MemoryStore, RedisStore } = built;
export type Limiter = Tokenlease.Limiter;
export type { Check, Operation, PolicyConfig, Store } from '../src/index.js';
