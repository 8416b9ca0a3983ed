import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';

export interface LuaScript {
  readonly name: string;
  readonly source: string;
  /** SHA-1 of `source`, as `SCRIPT LOAD` would return it. */
  readonly sha: string;
}

// This module sits directly under src/ (and dist/), so `../lua/` is the scripts folder in both.
const LUA_DIR = new URL('../lua/', import.meta.url);
const cache = new Map<string, LuaScript>();

function read(name: string): string {
  return readFileSync(new URL(`${name}.lua`, LUA_DIR), 'utf8');
}

/** A script from `lua/<name>.lua` with the shared prelude prepended (Redis Lua has no `require`). */
export function luaScript(name: string): LuaScript {
  let script = cache.get(name);
  if (!script) {
    const source = `${read('prelude')}\n${read(name)}`;
    script = { name, source, sha: createHash('sha1').update(source).digest('hex') };
    cache.set(name, script);
  }
  return script;
}
