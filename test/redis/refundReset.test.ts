import { afterAll, describe, expect, it } from 'vitest';
import { ArgumentError, Limiter, MemoryStore, RedisStore, type Store } from '../../src/index.js';
import { closeAllClients, redisClient, uniquePrefix } from '../support/clients.js';

afterAll(closeAllClients);

const policies = {
  bucket: { algorithm: 'token-bucket', rate: 1, period: '1h', burst: 3 },
  exactBucket: { algorithm: 'token-bucket', rate: 1, period: '1h', burst: 3, lease: 'exact' },
  window: { algorithm: 'fixed-window', limit: 3, window: '1h' },
  exactWindow: { algorithm: 'fixed-window', limit: 3, window: '1h', lease: 'exact' },
  sliding: { algorithm: 'sliding-window', limit: 3, window: '1h' },
  log: { algorithm: 'sliding-log', limit: 3, window: '1h' },
} as const;

async function admitted(limiter: Limiter, policy: string, key: string, n: number): Promise<number> {
  let count = 0;
  for (let i = 0; i < n; i++) if ((await limiter.consume(policy, key)).allowed) count++;
  return count;
}

const stores: [string, () => Promise<Store>][] = [
  ['MemoryStore', async () => new MemoryStore()],
  [
    'RedisStore',
    async () => {
      const store = new RedisStore({
        client: redisClient(),
        prefix: uniquePrefix('refund'),
        timeoutMs: 2000,
      });
      await store.ready();
      return store;
    },
  ],
];

describe.each(stores)('refund and reset on %s', (_name, makeStore) => {
  for (const policy of ['bucket', 'exactBucket', 'window', 'exactWindow', 'sliding']) {
    it(`${policy}: a refunded token can be spent again, and only once`, async () => {
      const store = await makeStore();
      const limiter = new Limiter({ store, policies, sweepIntervalMs: 0 });
      expect(await admitted(limiter, policy, 'k', 3), 'the limit').toBe(3);
      expect((await limiter.consume(policy, 'k')).allowed, 'over the limit').toBe(false);
      await limiter.refund(policy, 'k');
      // Another instance's view: the token went back to the store or stays with this limiter.
      expect(await admitted(limiter, policy, 'k', 3), 'the refunded token only').toBe(1);
      await limiter.close();
      await store.close();
    });

    it(`${policy}: reset gives a full limit back, here and to a second instance`, async () => {
      const store = await makeStore();
      const a = new Limiter({ store, policies, sweepIntervalMs: 0 });
      const b = new Limiter({ store, policies, sweepIntervalMs: 0 });
      expect(await admitted(a, policy, 'k', 4), 'the limit').toBe(3);
      await a.reset(policy, 'k');
      expect(await admitted(b, policy, 'k', 4), 'a fresh limit for another instance').toBe(3);
      await b.reset(policy, 'k');
      expect(await admitted(a, policy, 'k', 4), 'a fresh limit locally too').toBe(3);
      await a.close();
      await b.close();
      await store.close();
    });
  }

  it('refund of an algorithm without it is a typed error naming the field', async () => {
    const store = await makeStore();
    const limiter = new Limiter({ store, policies, sweepIntervalMs: 0 });
    await expect(limiter.refund('log', 'k')).rejects.toThrow(ArgumentError);
    await expect(limiter.refund('log', 'k')).rejects.toThrow(/policy/);
    await expect(limiter.refund('bucket', 'k', -1)).rejects.toThrow(/cost/);
    await expect(limiter.reset('nope', 'k')).rejects.toThrow(/unknown policy/);
    await expect(limiter.reset('bucket', 42 as unknown as string)).rejects.toThrow(/key/);
    await limiter.close();
    await store.close();
  });
});
