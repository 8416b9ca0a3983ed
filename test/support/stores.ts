import { MemoryStore, RedisStore, type Store } from '../../src/index.js';
import { redisClient, uniquePrefix } from './clients.js';

/**
 * A fresh store of each kind, by name (`describe.each(Object.keys(FRESH_STORES))`): in memory and on
 * the shared Redis, on the clock `now` when given (else Date.now and Redis TIME). The tests using
 * them are about what the stores answer, not timeouts: a call gets 1 s, not the default 50 ms,
 * which a loaded machine exceeded (the fail policy's admission then counted as one more allowed).
 */
export const FRESH_STORES: Record<string, (label: string, now?: () => number) => Promise<Store>> = {
  MemoryStore: async (_label, now) => new MemoryStore({ now }),
  RedisStore: async (label, now) => {
    const store = new RedisStore({
      client: redisClient(),
      prefix: uniquePrefix(label),
      now,
      timeoutMs: 1000,
    });
    await store.ready();
    return store;
  },
};
