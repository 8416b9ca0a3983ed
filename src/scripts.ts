import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';

export interface LuaScript {
  readonly name: string;
  readonly source: string;
  /** SHA-1 of `source`, as `SCRIPT LOAD` would return it. */
  readonly sha: string;
}

// This module sits directly under src/ (and dist/), so `../lua/` is the scripts folder in both.
const LUA_DIR = new URL('../lua/', import.meta.url);
const cache = new Map<string, LuaScript>();
/** Scripts that are not operations: the shared helpers and the batch dispatcher. */
const FRAMEWORK = new Set(['prelude', 'batch']);

function read(name: string): string {
  return readFileSync(new URL(`${name}.lua`, LUA_DIR), 'utf8');
}

function script(name: string, source: string): LuaScript {
  return { name, source, sha: createHash('sha1').update(source).digest('hex') };
}

/** A script from `lua/<name>.lua` with the shared prelude prepended (Redis Lua has no `require`). */
export function luaScript(name: string): LuaScript {
  let found = cache.get(name);
  if (!found) {
    found = name === 'batch' ? batchScript() : script(name, `${read('prelude')}\n${read(name)}`);
    cache.set(name, found);
  }
  return found;
}

/** Every operation script in `lua/` (file names without `.lua`). */
export function operationNames(): string[] {
  return readdirSync(LUA_DIR)
    .filter((f) => f.endsWith('.lua'))
    .map((f) => f.slice(0, -'.lua'.length))
    .filter((name) => !FRAMEWORK.has(name))
    .sort();
}

/**
 * `lua/batch.lua` with the prelude and every operation as a branch of `run_op` before it. The
 * operations read KEYS and ARGV, which Redis sets once per call: here they are locals of the chunk
 * that the dispatcher points at each operation's own key and arguments in turn. Branches, not a
 * function per operation: Redis runs the whole chunk on every call, and creating a closure costs
 * about 45 ns (90 ns stored in a table), so a table of the 28 operations cost ~2.5 µs of Redis CPU
 * per batch before its first operation ran, on a batch of one as much as the operation itself.
 */
function batchScript(): LuaScript {
  const branches = operationNames()
    .map((name, i) => `${i === 0 ? 'if' : 'elseif'} name == ${JSON.stringify(name)} then\n${read(name)}\n`)
    .join('');
  const source = [
    'local BATCH_KEYS, BATCH_ARGV = KEYS, ARGV',
    'local KEYS, ARGV = {}, {}',
    read('prelude'),
    // What `run_op` answers for a name that is no operation: a reply can never be this table.
    'local UNKNOWN_OPERATION = {}',
    `local function run_op(name)\n${branches}else\nreturn UNKNOWN_OPERATION\nend\nend`,
    read('batch'),
  ].join('\n');
  return script('batch', source);
}
