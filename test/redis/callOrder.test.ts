/**
 * A key's store calls run in the order they were made, background ones included. A multi-rule
 * consume refused by one rule puts back what the others took with a background call; a consume
 * made right after it used to travel in the same batch ahead of that refund (waiting calls went
 * first), so on Redis it found the token still gone and was refused, where MemoryStore admitted it.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { Limiter, MemoryStore, RedisStore, type Store } from '../../src/index.js';
import { closeAllClients, redisClient, uniquePrefix } from '../support/clients.js';

afterAll(closeAllClients);

const POLICIES = {
  bucket: { algorithm: 'token-bucket', rate: 1, period: '1h', burst: 1, lease: 'exact' },
  window: { algorithm: 'fixed-window', limit: 1, window: '1h', lease: 'exact' },
  empty: { algorithm: 'token-bucket', rate: 1, period: '1h', burst: 1, lease: 'exact' },
} as const;

const STORES: Record<string, () => Store> = {
  MemoryStore: () => new MemoryStore(),
  RedisStore: () =>
    new RedisStore({ client: redisClient(), prefix: uniquePrefix('call-order'), timeoutMs: 2000 }),
};

describe.each(Object.keys(STORES))('on %s', (name) => {
  it.each(['bucket', 'window'] as const)(
    '%s: the token a refused multi-rule consume put back is there for the next consume',
    async (policy) => {
      const store = STORES[name]!();
      const limiter = new Limiter({ store, policies: POLICIES, sweepIntervalMs: 0 });
      await limiter.consume('empty', 'b');
      const both = await limiter.consume([
        { policy, key: 'a' },
        { policy: 'empty', key: 'b' },
      ]);
      expect(both.allowed, 'the empty rule refuses the request').toBe(false);
      const next = await limiter.consume(policy, 'a');
      expect(next.allowed, 'the one token was put back before this consume ran').toBe(true);
      await limiter.close();
      await store.close();
    },
  );
});
