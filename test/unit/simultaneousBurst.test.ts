/**
 * Many requests for one key arriving before the store answered once (a new key's first burst, a
 * cold start after a deploy): they wait on one acquisition at a time, and each lease was sized by
 * slow start alone (1, 2, 4 …), so after eight acquisitions (255 tokens) the rest were refused
 * with `retryAfterMs` 1 while the bucket or window still had room. An exact limiter admits up to
 * the limit; so must one instance, on both stores, for every leased algorithm, and concurrency
 * slots alike.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { Limiter, type PolicyConfig } from '../../src/index.js';
import { FRESH_STORES } from '../support/stores.js';

/** Each policy, and what an exact limiter admits of simultaneous requests (at most 5000 are sent). */
const POLICIES: Record<string, { policy: PolicyConfig; capacity: number }> = {
  'token bucket': {
    policy: { algorithm: 'token-bucket', rate: 1, period: '1h', burst: 1000 },
    capacity: 1000,
  },
  'fixed window': { policy: { algorithm: 'fixed-window', limit: 1000, window: '1h' }, capacity: 1000 },
  'sliding window': { policy: { algorithm: 'sliding-window', limit: 1000, window: '1h' }, capacity: 1000 },
  'never refusing': {
    policy: { algorithm: 'token-bucket', rate: 1e9, period: '1s', burst: 1e12 },
    capacity: 5000,
  },
};

const limiters: Limiter[] = [];
afterEach(async () => {
  await Promise.all(limiters.splice(0).map((l) => l.close()));
});

describe.each(Object.keys(FRESH_STORES))('%s', (storeName) => {
  it.each(Object.keys(POLICIES))('%s: simultaneous requests are admitted up to the limit', async (name) => {
    const { policy, capacity } = POLICIES[name]!;
    const store = await FRESH_STORES[storeName]!(`burst-${name}`);
    const limiter = new Limiter({ store, policies: { p: policy } });
    limiters.push(limiter);
    const n = Math.min(capacity + 200, 5000);
    const decisions = await Promise.all(Array.from({ length: n }, () => limiter.consume('p', 'k')));
    const admitted = decisions.filter((d) => d.allowed).length;
    // Up to the limit, plus the one first sight docs/architecture.md "Guarantees" allows an instance
    // once it has counted its fleet (its second heartbeat: a loaded machine gets there mid-test).
    expect(admitted).toBeGreaterThanOrEqual(Math.min(n, capacity));
    expect(admitted).toBeLessThanOrEqual(Math.min(n, capacity + 1));
    // Whatever was refused was refused by the limit itself, not by waiting its turn.
    for (const d of decisions.filter((d) => !d.allowed)) expect(d.remaining).toBe(0);
  });

  it('concurrency: simultaneous acquires hold up to the limit', async () => {
    const store = await FRESH_STORES[storeName]!('burst-concurrency');
    const limiter = new Limiter({
      store,
      policies: { c: { algorithm: 'concurrency', limit: 1000, slotTtl: '1h' } },
    });
    limiters.push(limiter);
    const slots = await Promise.all(Array.from({ length: 1200 }, () => limiter.acquire('c', 'k')));
    expect(slots.filter((s) => s.allowed).length).toBe(1000);
    await Promise.all(slots.map((s) => s.release()));
  });
});
