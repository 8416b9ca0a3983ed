import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { Redis } from 'ioredis';
import { contestant } from './contestants.js';
import { type BenchContext, forEachLimited } from './context.js';
import { connect, disconnect, readCounters } from './redis.js';
import type { BenchOutput, Row } from './report.js';
import { Limiter, type PolicyConfig, RedisStore } from './tokenlease.js';

/**
 * One line per algorithm whose Redis footprint is measured; adding an algorithm is adding its line.
 * Limits are far above two decisions per key and windows long, so nothing expires mid-measurement.
 */
const ALGORITHMS: readonly {
  readonly name: string;
  readonly policy: PolicyConfig;
  /** How a request uses the policy (a concurrency policy is used through `acquire`). */
  readonly use?: (limiter: Limiter, key: string) => Promise<unknown>;
}[] = [
  { name: 'token-bucket', policy: { algorithm: 'token-bucket', rate: 1000, period: '1d', burst: 1000 } },
  { name: 'fixed-window', policy: { algorithm: 'fixed-window', limit: 1000, window: '1d' } },
  { name: 'sliding-window', policy: { algorithm: 'sliding-window', limit: 1000, window: '1h' } },
  { name: 'sliding-log', policy: { algorithm: 'sliding-log', limit: 1000, window: '1h' } },
  {
    name: 'sliding-log, quantum 1m',
    policy: { algorithm: 'sliding-log', limit: 1000, window: '1h', quantum: '1m' },
  },
  { name: 'leaky-bucket', policy: { algorithm: 'leaky-bucket', rate: 1000, period: '1d', burst: 1000 } },
  {
    name: 'concurrency',
    policy: { algorithm: 'concurrency', limit: 1000, slotTtl: '1h' },
    use: (limiter, key) => limiter.acquire('p', key),
  },
];

/** Peers measured the same way, through the HTTP/micro contestants' own code, on refused keys (long TTLs). */
const PEERS = ['rlf-redis', 'lua'];

interface TableSize {
  readonly keys: number;
  readonly heapPerKey: number;
  readonly rssPerKey: number;
}

async function measureTable(keys: number): Promise<TableSize> {
  const script = fileURLToPath(new URL('./memory-table.ts', import.meta.url));
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ['--expose-gc', '--max-old-space-size=4096', '--import', 'tsx', script, String(keys)],
    { maxBuffer: 1 << 20 },
  );
  return JSON.parse(stdout) as TableSize;
}

interface RedisSize {
  /** Sum of MEMORY USAGE over the keys written, per client key. */
  readonly usagePerKey: number;
  /** used_memory growth per client key: adds the keyspace and expiry dictionaries' share. */
  readonly usedPerKey: number;
  readonly redisKeysPerClientKey: number;
}

async function scan(client: Redis, prefix: string): Promise<string[]> {
  const found: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = await client.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
    cursor = next;
    found.push(...keys);
  } while (cursor !== '0');
  return found;
}

/**
 * Writes state for `clients` client keys through `decide`, twice per key (so stored numbers have
 * their usual precision, and a log holds two entries).
 */
async function measureRedis(
  observer: Redis,
  prefix: string,
  clients: number,
  decide: (key: string) => unknown,
): Promise<RedisSize> {
  const names = Array.from({ length: clients }, (_, i) => `client-${i}`);
  const before = await readCounters(observer);
  for (let pass = 0; pass < 2; pass++) await forEachLimited(names, 64, decide);
  const after = await readCounters(observer);
  const keys = await scan(observer, prefix);
  const pipeline = observer.pipeline();
  for (const key of keys) pipeline.memory('USAGE', key, 'SAMPLES', 0);
  const usage = ((await pipeline.exec()) ?? []).reduce((sum, [, bytes]) => sum + Number(bytes), 0);
  return {
    usagePerKey: usage / clients,
    usedPerKey: (after.usedMemory - before.usedMemory) / clients,
    redisKeysPerClientKey: keys.length / clients,
  };
}

function redisRow(contestantLabel: string, clients: number, size: RedisSize): Row {
  return {
    bench: 'memory',
    case: 'Redis, per client key (after 2 decisions)',
    contestant: contestantLabel,
    value: `${size.usagePerKey.toFixed(0)} B`,
    spread: '',
    vs: '',
    note: `MEMORY USAGE over ${clients} keys (${size.redisKeysPerClientKey.toFixed(2)} Redis keys each); used_memory grew ${size.usedPerKey.toFixed(0)} B per key`,
  };
}

/** Heap and RSS per key of the local table (fresh child per size), and Redis bytes per key. */
export async function runMemory(ctx: BenchContext): Promise<BenchOutput> {
  const rows: Row[] = [];
  for (const keys of ctx.profile.memory.keys) {
    ctx.log(`memory: local table, ${keys} keys`);
    const size = await measureTable(keys);
    rows.push({
      bench: 'memory',
      case: `local table, ${keys.toLocaleString('en-US')} keys`,
      contestant: 'tokenlease Limiter',
      value: `${size.heapPerKey.toFixed(0)} B heap/key`,
      spread: '',
      vs: '',
      note: `RSS ${size.rssPerKey.toFixed(0)} B/key; fresh process, after GC`,
    });
  }

  const clients = ctx.profile.memory.redisKeys;
  const observer = await connect(ctx.redis.url);
  try {
    for (const algorithm of ALGORITHMS) {
      const { name, policy } = algorithm;
      ctx.log(`memory: Redis, tokenlease ${name}`);
      const prefix = `${ctx.runId}:mem:${name}:`;
      const client = await connect(ctx.redis.url);
      const store = new RedisStore({ client, prefix, timeoutMs: 1000 });
      const limiter = new Limiter({ store, policies: { p: policy } });
      try {
        const use = algorithm.use ?? ((l: Limiter, key: string) => l.consume('p', key));
        const size = await measureRedis(observer, prefix, clients, (key) => use(limiter, key));
        rows.push(redisRow(`tokenlease ${name}`, clients, size));
      } finally {
        await limiter.close();
        await store.close();
        await disconnect(client);
      }
    }
    for (const id of PEERS) {
      const c = contestant(id);
      ctx.log(`memory: Redis, ${c.label}`);
      const prefix = `${ctx.runId}:mem:${id}:`;
      const decider = await c.create('denied', { redisUrl: ctx.redis.url, prefix });
      try {
        rows.push(
          redisRow(c.label, clients, await measureRedis(observer, prefix, clients, (k) => decider.decide(k))),
        );
      } finally {
        await decider.close();
      }
    }
  } finally {
    await disconnect(observer);
  }
  return { rows, targets: [] };
}
