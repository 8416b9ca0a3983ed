import { afterAll, expect, it } from 'vitest';
import { Limiter, RedisStore } from '../../src/index.js';
import { storageKey } from '../../src/stores/keys.js';
import { keySlot } from '../../src/stores/slot.js';
import { closeAllClients, clusterClient, uniquePrefix } from '../support/clients.js';

afterAll(closeAllClients);

// A Cluster client whose ioredis `keyPrefix` holds a hash tag puts every key in the tag's slot:
// ioredis routes by the key it sends, prefix included. The store's own idea of a key's node (its
// breaker's shard, and where a batch in flight went, to fail it when that node's connection
// closes) must be that slot's node, not the one the key would have without the prefix.
it("under a keyPrefix with a hash tag, a key's shard is the node of the tag's slot", async () => {
  const client = clusterClient({ keyPrefix: '{tenant-7}:' });
  const store = new RedisStore({ client, prefix: uniquePrefix('kps'), timeoutMs: 2000 });
  await store.ready();
  const limiter = new Limiter({
    store,
    policies: { tb: { algorithm: 'token-bucket', rate: 1, period: '1h', burst: 5, lease: 'exact' } },
  });
  expect((await limiter.consume('tb', 'k')).allowed).toBe(true);
  const slots = store.client.slots as string[][];
  const home = slots[keySlot('{tenant-7}:')]?.[0];
  expect(home).toBeDefined();
  const shards = new Set<string>();
  for (let i = 0; i < 50; i++) shards.add(store.shardOf(storageKey('token-bucket', 'tb', `key-${i}`)));
  expect([...shards]).toEqual([home]);
  await limiter.close();
  await store.close();
});
