import { afterAll, describe, expect, it } from 'vitest';
import { type Decision, Limiter, RedisStore } from '../../src/index.js';
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
