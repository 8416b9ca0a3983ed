import { MemoryStore, RedisStore, type Store } from '../../src/index.js';
import { redisClient, uniquePrefix } from './clients.js';

/** A fresh store of each kind, by name (`describe.each(Object.keys(FRESH_STORES))`): in memory and on the shared Redis. */
export const FRESH_STORES: Record<string, (label: string) => Promise<Store>> = {
  MemoryStore: async () => new MemoryStore(),
  RedisStore: async (label) => {
    const store = new RedisStore({ client: redisClient(), prefix: uniquePrefix(label) });
    await store.ready();
    return store;
  },
};
