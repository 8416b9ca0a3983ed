/**
 * Child process of the memory bench (run with --expose-gc): `tsx bench/memory-table.ts <keys>`.
 * Measures what one tracked (policy, key) pair costs in a Limiter's local table and prints JSON.
 */
import { setImmediate as tick } from 'node:timers/promises';
import { Limiter, type Operation, type Store } from './tokenlease.js';

const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with node --expose-gc');

/**
 * The shared state is not what this measures, so the store keeps none: every operation runs the
 * real algorithm on an absent (full) bucket, as a store with limits far above the load would answer.
 * (The MemoryStore would add its own buckets to the heap, and its periodic expiry sweep walks every
 * bucket, which at a million keys costs more time than the whole rest of the bench.)
 */
const bottomless: Store = {
  run: async <S, Req, Res>(op: Operation<S, Req, Res>, _key: string, req: Req) =>
    op.apply(undefined, Date.now(), req).result,
  close: async () => {},
};

async function settled(): Promise<{ heap: number; rss: number }> {
  for (let i = 0; i < 3; i++) {
    await tick();
    (gc as () => void)();
  }
  const m = process.memoryUsage();
  return { heap: m.heapUsed, rss: m.rss };
}

const keys = Number(process.argv[2]);
const policies = { p: { algorithm: 'token-bucket', rate: 1e9, burst: 1e9 } } as const;
const before = await settled();
const limiter = new Limiter({ store: bottomless, policies, maxKeys: keys, sweepIntervalMs: 0 });
for (let i = 0; i < keys; i++) await limiter.consume('p', `client-${i}`);
const after = await settled();
const tracked = limiter.stats().keys;
if (tracked !== keys) throw new Error(`expected ${keys} tracked keys, the limiter holds ${tracked}`);
process.stdout.write(
  `${JSON.stringify({ keys, heapPerKey: (after.heap - before.heap) / keys, rssPerKey: (after.rss - before.rss) / keys })}\n`,
);
await limiter.close();
