import { Cluster, Redis } from 'ioredis';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { RedisStore } from '../../src/index.js';
import { tokenBucketAcquire } from '../../src/stores/tokenBucketOps.js';
import { closeAllClients, trackClient, uniquePrefix } from '../support/clients.js';

afterAll(closeAllClients);

/** Rejects if `promise` has not settled within `ms` (the bug this guards against was a hang). */
function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not settle within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

const bucket = { rate: 10, periodMs: 1000, burst: 10, want: 1, min: 1, ahead: 0 };

// A client created with `lazyConnect` connects on its first command; the store sends none until a
// connection is up, so it must connect such a client (or its safe duplicate, which inherits the
// option) itself. Before, `ready()` waited forever and every call timed out.
describe('RedisStore on a client created with lazyConnect', () => {
  it('Cluster (the simulator probe with an explicit clock that hung in ready())', async () => {
    const client = trackClient(new Cluster(inject('clusterNodes'), { lazyConnect: true }));
    let t = 1_700_000_000_000;
    const store = new RedisStore({ client, now: () => t++, prefix: uniquePrefix('lazy'), timeoutMs: 2000 });
    await within(store.ready(), 5000, 'ready()');
    const grant = await within(store.run(tokenBucketAcquire, 'k', bucket), 5000, 'a store call');
    expect(grant.granted).toBe(1);
    await store.close();
  });

  it('Cluster that is already safe (the store runs on it, not on a duplicate)', async () => {
    const client = trackClient(
      new Cluster(inject('clusterNodes'), {
        lazyConnect: true,
        enableOfflineQueue: false,
        retryDelayOnFailover: 0,
        enableReadyCheck: false,
        redisOptions: { autoResendUnfulfilledCommands: false },
      }),
    );
    const store = new RedisStore({ client, prefix: uniquePrefix('lazy'), timeoutMs: 2000 });
    expect(store.client, 'no duplicate').toBe(client);
    await within(store.ready(), 5000, 'ready()');
    expect((await store.run(tokenBucketAcquire, 'k', bucket)).granted).toBe(1);
    await store.close();
  });

  it('single Redis', async () => {
    const client = trackClient(new Redis(inject('redisUrl'), { lazyConnect: true }));
    const store = new RedisStore({ client, prefix: uniquePrefix('lazy'), timeoutMs: 2000 });
    await within(store.ready(), 5000, 'ready()');
    expect((await store.run(tokenBucketAcquire, 'k', bucket)).granted).toBe(1);
    await store.close();
  });
});
