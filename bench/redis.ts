import { Redis } from 'ioredis';
import { ensureRedisInstalled, type RedisProcess, startRedis } from '../test/support/redisServer.js';

/** The Redis the benches talk to: a private server they own, or one given by URL (the smoke test's). */
export interface BenchRedis {
  readonly url: string;
  /** False when the server is shared (given by URL): nothing may flush it or rely on its totals alone. */
  readonly owned: boolean;
  readonly version: string;
  /** The server's process, when the bench started it. */
  readonly pid?: number;
  stop(): Promise<void>;
}

export async function openRedis(url: string | undefined): Promise<BenchRedis> {
  let server: RedisProcess | undefined;
  if (url === undefined) {
    ensureRedisInstalled();
    server = await startRedis();
  }
  const target = url ?? (server as RedisProcess).url;
  const probe = await connect(target);
  const version = /redis_version:(\S+)/.exec(await probe.info('server'))?.[1] ?? 'unknown';
  probe.disconnect();
  return {
    url: target,
    owned: server !== undefined,
    version,
    ...(server ? { pid: server.pid } : {}),
    stop: async () => {
      await server?.stop();
    },
  };
}

/**
 * A client with the settings tokenlease asks for (no offline queue, no blind re-sends), given to
 * every Redis contestant alike so none is favoured by its connection settings.
 */
export async function connect(url: string): Promise<Redis> {
  const client = new Redis(url, {
    lazyConnect: true,
    enableOfflineQueue: false,
    autoResendUnfulfilledCommands: false,
    maxRetriesPerRequest: 1,
    disconnectTimeout: 50,
  });
  client.on('error', () => {});
  countWrites(client);
  await client.connect();
  return client;
}

const writes = new WeakMap<Redis, { n: number }>();

/**
 * Counts the requests a client writes to its socket: ioredis writes a lone command with one
 * `write` and a whole pipeline (or MULTI) with one, so this is the client's round trips. Redis's
 * commandstats cannot tell a pipeline from single commands; this can.
 */
function countWrites(client: Redis): void {
  const counter = { n: 0 };
  writes.set(client, counter);
  const wrap = () => {
    const stream = (client as unknown as { stream?: { write: (...a: unknown[]) => boolean } }).stream;
    if (!stream || (stream as { counted?: boolean }).counted) return;
    const write = stream.write;
    stream.write = function (this: unknown, ...args: unknown[]) {
      counter.n++;
      return write.apply(this, args);
    };
    (stream as { counted?: boolean }).counted = true;
  };
  // A reconnect gives the client a new socket; 'connect' fires once it exists, before ready checks.
  client.on('connect', wrap);
}

/** Requests written so far by a client made with `connect` (its connection handshake included). */
export function writesOf(client: Redis): number {
  return writes.get(client)?.n ?? 0;
}

export async function disconnect(client: Redis): Promise<void> {
  await client.quit().catch(() => {});
  client.disconnect();
}

/** Counters read from INFO at one instant. */
export interface RedisCounters {
  /** Calls per command name (cmdstat_*), including commands run from inside Lua scripts. */
  readonly calls: ReadonlyMap<string, number>;
  /** Microseconds Redis spent executing, per command name (cmdstat usec). */
  readonly usec: ReadonlyMap<string, number>;
  /** used_cpu_sys + used_cpu_user, in ms. */
  readonly cpuMs: number;
  readonly netInBytes: number;
  readonly netOutBytes: number;
  readonly usedMemory: number;
}

export async function readCounters(client: Redis): Promise<RedisCounters> {
  const info = await client.info('all');
  const calls = new Map<string, number>();
  const usec = new Map<string, number>();
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm)) {
    calls.set(m[1] as string, Number(m[2]));
    usec.set(m[1] as string, Number(m[3]));
  }
  const field = (name: string) => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(info)?.[1] ?? Number.NaN);
  return {
    calls,
    usec,
    cpuMs: (field('used_cpu_sys') + field('used_cpu_user')) * 1000,
    netInBytes: field('total_net_input_bytes'),
    netOutBytes: field('total_net_output_bytes'),
    usedMemory: field('used_memory'),
  };
}

/** Commands the bench itself sends to observe Redis; they are not the contestants' cost. */
const OBSERVER_COMMANDS = new Set([
  'info',
  'config|resetstat',
  'config|get',
  'client|setname',
  'client|info',
  'hello',
  'ping',
  'script|load',
  'memory|usage',
  'scan',
  'dbsize',
  'quit',
  'select',
]);

export interface CommandDelta {
  /** Every command executed, the ones run inside scripts included. */
  readonly total: number;
  /** EVAL / EVALSHA / FCALL calls (each was one request, alone or inside a pipeline). */
  readonly scripts: number;
  /**
   * Microseconds of command execution. A script's usec includes the commands it ran, which
   * report their own usec too: only top-level commands are summed (scripts, and anything else
   * when no script ran).
   */
  readonly usec: number;
  readonly byName: ReadonlyMap<string, number>;
}

function isScriptCall(name: string): boolean {
  return name.startsWith('eval') || name.startsWith('fcall');
}

export function commandDelta(before: RedisCounters, after: RedisCounters): CommandDelta {
  const byName = new Map<string, number>();
  let total = 0;
  let scripts = 0;
  let scriptUsec = 0;
  let otherUsec = 0;
  for (const [name, calls] of after.calls) {
    if (OBSERVER_COMMANDS.has(name)) continue;
    const d = calls - (before.calls.get(name) ?? 0);
    if (d <= 0) continue;
    byName.set(name, d);
    total += d;
    const us = (after.usec.get(name) ?? 0) - (before.usec.get(name) ?? 0);
    if (isScriptCall(name)) {
      scripts += d;
      scriptUsec += us;
    } else otherUsec += us;
  }
  return { total, scripts, usec: scripts > 0 ? scriptUsec : otherUsec, byName };
}
