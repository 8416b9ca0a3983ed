import { afterAll, describe, expect, it } from 'vitest';
import { ArgumentError, Limiter, MemoryStore, RedisStore } from '../../src/index.js';
import { storageKey } from '../../src/stores/keys.js';
import { closeAllClients, redisClient, uniquePrefix } from '../support/clients.js';

afterAll(closeAllClients);

// Exact policies: every consume is decided by the store, so a read must agree with it exactly.
const policies = {
  bucket: { algorithm: 'token-bucket', rate: 1, period: '1m', burst: 3, lease: 'exact' },
  window: { algorithm: 'fixed-window', limit: 3, window: '1m', lease: 'exact' },
  firstHit: { algorithm: 'fixed-window', limit: 3, window: '1m', anchor: 'first-hit', lease: 'exact' },
  sliding: { algorithm: 'sliding-window', limit: 3, window: '1m', lease: 'exact' },
  log: { algorithm: 'sliding-log', limit: 3, window: '1m' },
  quantised: { algorithm: 'sliding-log', limit: 3, window: '1m', quantum: '1s' },
  leaky: { algorithm: 'leaky-bucket', rate: 1, period: '1m', burst: 3 },
  slots: { algorithm: 'concurrency', limit: 3 },
} as const;
const consumable = ['bucket', 'window', 'firstHit', 'sliding', 'log', 'quantised', 'leaky'] as const;

function setup(kind: 'memory' | 'redis') {
  const clock = { t: 1_700_000_000_250 };
  const now = () => clock.t;
  const client = kind === 'redis' ? redisClient() : undefined;
  const store = client
    ? new RedisStore({ client, now, prefix: uniquePrefix('peek'), timeoutMs: 2000 })
    : new MemoryStore({ now });
  const limiter = new Limiter({ store, policies, now, sweepIntervalMs: 0 });
  /** What the store holds under a key: its serialised value and its expiry, or null. */
  const held = async (policy: keyof typeof policies, key: string) => {
    const id = storageKey(policies[policy].algorithm, policy, key);
    if (store instanceof MemoryStore) return store.size;
    const redisKey = store.redisKey(id);
    const [dump, ttl] = await Promise.all([client!.dumpBuffer(redisKey), client!.pttl(redisKey)]);
    // PTTL counts down in real time: rounded to seconds, it does not change between two reads.
    return dump === null ? null : { dump: dump.toString('base64'), ttl: Math.round(ttl / 1000) };
  };
  return { clock, limiter, held, store };
}

describe.each(['memory', 'redis'] as const)('Limiter.peek on %s', (kind) => {
  for (const policy of consumable) {
    it(`${policy}: a read of an unknown key creates nothing and sees the full limit`, async () => {
      const { limiter, held, store } = setup(kind);
      const before = await held(policy, 'fresh');
      const d = await limiter.peek(policy, 'fresh');
      expect(d).toMatchObject({ allowed: true, limit: 3, remaining: 3, resetMs: 0, retryAfterMs: 0 });
      expect(await held(policy, 'fresh'), 'no key written').toEqual(before);
      expect(limiter.stats().decisions, 'a read is not a decision').toBe(0);
      await limiter.close();
      await store.close();
    });

    it(`${policy}: reads what the next consume of 1 sees, and changes nothing`, async () => {
      const { clock, limiter, held, store } = setup(kind);
      for (let i = 0; i < 4; i++) {
        const consumed = await limiter.consume(policy, 'k');
        clock.t += 1;
        const state = await held(policy, 'k');
        const read = await limiter.peek(policy, 'k');
        const again = await limiter.peek(policy, 'k');
        expect(await held(policy, 'k'), `after consume ${i + 1}: the read wrote nothing`).toEqual(state);
        expect(again, 'a second read sees the same').toEqual(read);
        // Refused consumes take nothing either, so the last reads equal the one before.
        expect(read.remaining, `remaining after consume ${i + 1}`).toBe(
          consumed.allowed ? consumed.remaining : 0,
        );
        const next = await limiter.consume(policy, `twin-${i}`, 1);
        expect(next.allowed).toBe(true); // another key is untouched by the reads
        expect(read.allowed, `a cost-1 consume after ${i + 1} would pass`).toBe(i + 1 < 3);
      }
      const refusedAfter = await limiter.peek(policy, 'k');
      const refused = await limiter.consume(policy, 'k');
      expect(refused.allowed).toBe(false);
      expect(refusedAfter.retryAfterMs, 'the read says when it passes, as the refusal does').toBe(
        refused.retryAfterMs,
      );
      clock.t += refused.retryAfterMs;
      expect((await limiter.peek(policy, 'k')).allowed, 'after waiting retryAfterMs').toBe(true);
      expect((await limiter.consume(policy, 'k')).allowed).toBe(true);
      await limiter.close();
      await store.close();
    });
  }

  it('a leased key holding tokens is read from its local state, without a store call', async () => {
    const { limiter, store } = setup(kind);
    limiter.setPolicies({
      ...policies,
      leased: { algorithm: 'token-bucket', rate: 1, period: '1m', burst: 100 },
    });
    expect((await limiter.consume('leased', 'k')).allowed).toBe(true);
    const calls = limiter.stats().storeCalls;
    const read = await limiter.peek('leased', 'k');
    expect(read.source, 'answered by the lease core').toBe('lease');
    expect(limiter.stats().storeCalls, 'no store call').toBe(calls);
    expect(read).toMatchObject({ allowed: true, limit: 100, remaining: 99 });
    await limiter.close();
    await store.close();
  });

  it('rejects a concurrency policy and unknown policies with ArgumentError naming the field', async () => {
    const { limiter, store } = setup(kind);
    await expect(limiter.peek('slots', 'k')).rejects.toThrow(ArgumentError);
    await expect(limiter.peek('nope', 'k')).rejects.toThrow(/policy/);
    await expect(limiter.peek('bucket', 42 as unknown as string)).rejects.toThrow(/key/);
    await limiter.close();
    await store.close();
  });
});
