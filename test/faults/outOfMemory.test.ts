/**
 * Redis out of memory under `maxmemory-policy noeviction` (the policy docs/operations.md asks for)
 * refuses a script's first write with OOM, so the call certainly changed nothing. Found in the
 * operator trial: the store reported it as a failure that may have run, so `close()` stranded every
 * leased token instead of handing it back once memory was free, and usage admitted under an
 * allowance was never reported (the bucket never charged for it).
 */
import { describe, expect, it } from 'vitest';
import { Limiter, RedisStore, StoreUnavailableError } from '../../src/index.js';
import { storageKey } from '../../src/stores/keys.js';
import { tokenBucketAcquire } from '../../src/stores/tokenBucketOps.js';
import { storedLevel } from '../support/bucketState.js';
import { eventually } from '../support/eventually.js';
import { privateRedis } from '../support/privateRedis.js';

// A server of its own: out of memory, it would refuse every other test file's writes.
const { client } = privateRedis();

const KEYS = Array.from({ length: 10 }, (_, i) => `k${i}`);
const USED = 30;
const BURST = 1000;
/** Refill is negligible over the test (1000 an hour), so a bucket's level says what it was charged. */
const bucket = { algorithm: 'token-bucket', rate: BURST, period: '1h', burst: BURST } as const;

/** Every write Redis is asked for is refused with OOM (1 byte is less than Redis itself uses). */
async function outOfMemory(): Promise<void> {
  const admin = client();
  await admin.config('SET', 'maxmemory-policy', 'noeviction');
  await admin.config('SET', 'maxmemory', '1');
}

async function memoryFreed(): Promise<void> {
  await client().config('SET', 'maxmemory', '0');
}

async function limiterHolding(policy: typeof bucket & { lease?: { writeBehind: boolean } }) {
  const prefix = `oom:${Math.random().toString(36).slice(2, 8)}:`;
  const store = new RedisStore({ client: client(), prefix, timeoutMs: 1000 });
  await store.ready();
  // closeTimeoutMs far beyond the time memory stays full: close() returns as soon as all is back.
  const limiter = new Limiter({ store, policies: { p: policy }, closeTimeoutMs: 30_000 });
  return { store, limiter };
}

async function spend(limiter: Limiter): Promise<void> {
  for (let i = 0; i < USED; i++) {
    const decisions = await Promise.all(KEYS.map((k) => limiter.consume('p', k)));
    expect(
      decisions.every((d) => d.allowed && d.source !== 'fallback'),
      'every decision from the store',
    ).toBe(true);
  }
}

async function levels(store: RedisStore): Promise<number[]> {
  const admin = client();
  return Promise.all(
    KEYS.map((k) => storedLevel(admin, store.redisKey(storageKey('token-bucket', 'p', k)), BURST)),
  );
}

function expectCharged(after: number[], what: string): void {
  for (const [i, level] of after.entries()) {
    expect(level, `bucket ${KEYS[i]}: ${what}`).toBeGreaterThanOrEqual(BURST - USED - 0.01);
    expect(level, `bucket ${KEYS[i]} charged for what was admitted`).toBeLessThanOrEqual(BURST - USED + 1);
  }
}

describe('Redis out of memory (noeviction)', () => {
  it('an OOM refusal is a call that certainly did not run', async () => {
    const store = new RedisStore({ client: client(), prefix: 'oom-refusal:', timeoutMs: 1000 });
    await store.ready();
    await outOfMemory();
    try {
      const req = { rate: 1, periodMs: 1000, burst: 10, want: 1, min: 1, ahead: 0 };
      const err = await store.run(tokenBucketAcquire, 'k', req).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err, 'OOM: nothing ran').toBeInstanceOf(StoreUnavailableError);
      expect((err as Error).message, "the store's error quotes Redis").toMatch(/OOM/);
    } finally {
      await memoryFreed();
      await store.close();
    }
  });

  it('close() hands every leased token back once memory is free again', async () => {
    const { store, limiter } = await limiterHolding({ ...bucket, lease: { writeBehind: false } });
    await spend(limiter);
    expect(limiter.stats().tokensLeased, 'tokens are leased').toBeGreaterThan(KEYS.length * USED);
    await outOfMemory();
    const freed = new Promise((resolve) => setTimeout(resolve, 200)).then(memoryFreed);
    await limiter.close();
    await freed;
    const { tokensStranded } = limiter.stats();
    const after = await levels(store);
    await store.close();
    expect(tokensStranded, 'nothing stranded').toBe(0);
    expectCharged(after, 'got back everything not used');
  });

  it('close() reports the usage admitted under allowances once memory is free again', async () => {
    const { store, limiter } = await limiterHolding(bucket);
    // Allowances are granted once the fleet is counted (the second heartbeat).
    await eventually(async () => expect(limiter.stats().fleet, 'fleet counted').toBeGreaterThan(0));
    await spend(limiter);
    const { tokensAllowed, tokensReported } = limiter.stats();
    expect(
      tokensAllowed - tokensReported,
      'usage admitted under allowances, not reported yet',
    ).toBeGreaterThan(0);
    await outOfMemory();
    const freed = new Promise((resolve) => setTimeout(resolve, 200)).then(memoryFreed);
    await limiter.close();
    await freed;
    const after = await levels(store);
    await store.close();
    expectCharged(after, 'every admission reported');
  });

  it('a decision that waited for an OOM refusal is not counted as local (stats().localDecisions)', async () => {
    const exact = { ...bucket, lease: 'exact' } as const;
    const { store, limiter } = await limiterHolding(exact as never);
    await limiter.consume('p', 'k0');
    await outOfMemory();
    const before = limiter.stats().localDecisions;
    // Two, below the breaker's three failures in a row: each went to Redis and was refused there.
    const decisions = [await limiter.consume('p', 'k0'), await limiter.consume('p', 'k1')];
    const counted = limiter.stats().localDecisions - before;
    await memoryFreed();
    await limiter.close();
    await store.close();
    expect(decisions.map((d) => d.source)).toEqual(['fallback', 'fallback']);
    expect(counted, 'they waited for a round trip').toBe(0);
  });
});
