import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { Limiter, RedisStore } from '../../src/index.js';
import { closeAllClients, redisClient, trackClient, uniquePrefix } from '../support/clients.js';

afterAll(closeAllClients);

describe('many limiter instances on one real Redis', () => {
  it('20 instances with their own connections never admit more than the burst, and close() returns the rest', async () => {
    const prefix = uniquePrefix('burst');
    // Burst 200 and effectively no refill during the test (1 token per day). Leases only: once the
    // fleet is counted, allowances may admit a stated bound more (test/redis/writeBehind.test.ts).
    const policies = {
      p: {
        algorithm: 'token-bucket' as const,
        rate: 1,
        period: '1d' as const,
        burst: 200,
        lease: { writeBehind: false },
      },
    };
    const base = redisClient();
    const start = async () =>
      Promise.all(
        Array.from({ length: 20 }, async () => {
          const client = trackClient(new Redis(base.options));
          const store = new RedisStore({ client, prefix, timeoutMs: 2000 });
          await store.ready();
          return { limiter: new Limiter({ store, policies }), store };
        }),
      );
    const round = async (instances: Awaited<ReturnType<typeof start>>) => {
      const decisions = await Promise.all(
        Array.from({ length: 1000 }, (_, i) => instances[i % 20]!.limiter.consume('p', 'client-42')),
      );
      return decisions.filter((d) => d.allowed).length;
    };

    const first = await start();
    const admitted = await round(first);
    expect(admitted).toBeLessThanOrEqual(200);
    await Promise.all(first.map(({ limiter }) => limiter.close()));

    const second = await start();
    const more = await round(second);
    expect(admitted + more, `first round ${admitted}, second ${more}`).toBe(200);
    await Promise.all(second.map(({ limiter }) => limiter.close()));
    await Promise.all([...first, ...second].map(({ store }) => store.close()));
  });
});
