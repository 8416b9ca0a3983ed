import { afterAll, expect, it } from 'vitest';
import { Limiter, RedisStore } from '../../src/index.js';
import { storageKey } from '../../src/stores/keys.js';
import { closeAllClients, redisClient, uniquePrefix } from '../support/clients.js';

afterAll(closeAllClients);

// An application whose ioredis client has a `keyPrefix` (ioredis puts it before every key it
// sends, scripts' keys included): the limiter works under it, and `store.redisKey()`, which an
// operator uses to find a bucket with redis-cli, names the key as Redis has it. It left the
// client's prefix out, naming a key that does not exist.
it('under a client keyPrefix, redisKey() names the key Redis holds, and every key has a TTL', async () => {
  const prefix = uniquePrefix('kp');
  const store = new RedisStore({ client: redisClient({ keyPrefix: 'app:' }), prefix, timeoutMs: 2000 });
  const limiter = new Limiter({
    store,
    policies: {
      tb: { algorithm: 'token-bucket', rate: 1, period: '1h', burst: 5, lease: 'exact' },
      fw: { algorithm: 'fixed-window', limit: 3, window: '1h' },
    },
  });
  const admitted = [];
  for (let i = 0; i < 6; i++) admitted.push((await limiter.consume('tb', 'k')).allowed);
  expect(admitted).toEqual([true, true, true, true, true, false]);
  await limiter.consume('fw', 'k');
  await limiter.close();
  const admin = redisClient();
  const bucket = store.redisKey(storageKey('token-bucket', 'tb', 'k'));
  expect(bucket.startsWith(`app:${prefix}`)).toBe(true);
  expect(await admin.exists(bucket), `${bucket} exists`).toBe(1);
  expect(Number((await admin.get(bucket))?.split(' ')[0])).toBeLessThan(1);
  const keys = await admin.keys(`app:${prefix}*`);
  expect(keys).toContain(store.redisKey(storageKey('fixed-window', 'fw', 'k')));
  for (const key of keys) expect(await admin.pttl(key), key).toBeGreaterThan(0);
  expect(await admin.keys(`${prefix}*`), 'nothing outside the client prefix').toEqual([]);
  await store.close();
});
