import { afterAll, describe, expect, it } from 'vitest';
import { type Decision, Limiter, MemoryStore, RedisStore } from '../../src/index.js';
import { tokenBucketAcquire } from '../../src/stores/tokenBucketOps.js';
import { closeAllClients, redisClient, uniquePrefix } from '../support/clients.js';

afterAll(closeAllClients);

const MINUTES = 60_000;
const skewed = (offsetMs: number) => () => Date.now() + offsetMs;
const delay = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

describe('gateway clock skew changes nothing (the store uses Redis TIME)', () => {
  it('two gateways 10 minutes apart share a bucket exactly', async () => {
    const store = new RedisStore({ client: redisClient(), prefix: uniquePrefix('skew'), timeoutMs: 1000 });
    await store.ready();
    const policies = {
      p: { algorithm: 'token-bucket' as const, rate: 1, period: '1d' as const, burst: 100 },
    };
    const round = async (offsets: number[]) => {
      const limiters = offsets.map((o) => new Limiter({ store, policies, now: skewed(o) }));
      const ds = await Promise.all(Array.from({ length: 150 }, (_, i) => limiters[i % 2]!.consume('p', 'k')));
      await Promise.all(limiters.map((l) => l.close()));
      return ds;
    };
    const first = await round([5 * MINUTES, -5 * MINUTES]);
    const admitted = first.filter((d) => d.allowed).length;
    expect(admitted).toBeLessThanOrEqual(100);
    for (const d of first.filter((x) => !x.allowed)) {
      // 1 token a day: the honest wait is up to a day, never negative and never inflated by skew.
      expect(d.retryAfterMs).toBeGreaterThan(0);
      expect(d.retryAfterMs).toBeLessThanOrEqual(86_400_000);
    }
    const second = await round([-5 * MINUTES, 5 * MINUTES]);
    expect(admitted + second.filter((d) => d.allowed).length, 'every leased token came back').toBe(100);
    await store.close();
  });

  it('skewed gateways refill at the true rate: no extra tokens, no stall, honest retry times', async () => {
    const store = new RedisStore({ client: redisClient(), prefix: uniquePrefix('skew'), timeoutMs: 1000 });
    await store.ready();
    const rate = 100;
    const policies = { p: { algorithm: 'token-bucket' as const, rate, burst: 10 } };
    const limiters = [3 * MINUTES, -3 * MINUTES].map((o) => new Limiter({ store, policies, now: skewed(o) }));
    const decisions: Decision[] = [];
    const start = Date.now();
    while (Date.now() - start < 600) {
      decisions.push(
        ...(await Promise.all(limiters.flatMap((l) => [l.consume('p', 'k'), l.consume('p', 'k')]))),
      );
      await delay(2);
    }
    const elapsedS = (Date.now() - start) / 1000;
    const admitted = decisions.filter((d) => d.allowed).length;
    // The exact bucket's bound over the run; skew in either direction would show up beyond it.
    expect(admitted).toBeLessThanOrEqual(10 + rate * elapsedS + 1);
    expect(admitted, 'not stalled by a clock minutes behind').toBeGreaterThan(0.5 * rate * elapsedS);
    const waits = decisions.filter((d) => !d.allowed).map((d) => d.retryAfterMs);
    expect(Math.max(...waits), 'retry times are milliseconds, not minutes').toBeLessThanOrEqual(1000);
    await Promise.all(limiters.map((l) => l.close()));
    await store.close();
  });
});

describe('a store clock that jumps', () => {
  // Explicit clocks stand in for Redis TIME here: the system clock of the test machine cannot move.
  it('backwards: Lua and MemoryStore both refill from the new time instead of waiting out the jump', async () => {
    const clock = { t: 1_700_000_000_000 };
    const now = () => clock.t;
    const redis = new RedisStore({
      client: redisClient(),
      prefix: uniquePrefix('jump'),
      timeoutMs: 1000,
      now,
    });
    await redis.ready();
    const memory = new MemoryStore({ now });
    const req = (want: number) => ({ rate: 10, periodMs: 1000, burst: 10, want, min: want, ahead: 0 });
    const both = async (want: number) => {
      const [a, b] = await Promise.all([
        redis.run(tokenBucketAcquire, 'k', req(want)),
        memory.run(tokenBucketAcquire, 'k', req(want)),
      ]);
      expect(a, 'Lua and TypeScript agree').toEqual(b);
      return a;
    };
    expect((await both(10)).granted, 'the whole burst').toBe(10);
    clock.t -= 3_600_000; // an hour back
    expect((await both(1)).granted, 'empty, nothing refilled by going back').toBe(0);
    clock.t += 100; // one token at 10/s
    expect((await both(1)).granted, 'a token after 100 ms, not after an hour').toBe(1);
    clock.t += 24 * 3_600_000; // a day forward
    expect((await both(100)).levelBefore, 'a forward jump refills at most the burst').toBe(10);
    await redis.close();
  });
});
