import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { RedisStore, StoreError } from '../../src/index.js';
import { closeAllClients, trackClient } from '../support/clients.js';
import { type RedisClusterProcess, startCluster } from '../support/redisServer.js';

// The Cluster side of test/redis/readyRefused.test.ts: with a wrong password, `ready()` waited its
// whole 10 s and then said only "Failed to refresh slots cache", ioredis's message for a slot map
// no node gave; the node's own WRONGPASS is in that error's `lastNodeError`.

let cluster: RedisClusterProcess | undefined;
beforeAll(async () => {
  cluster = await startCluster({ masters: 3 });
  for (const node of cluster.nodes) {
    const admin = new Redis(node.url);
    await admin.config('SET', 'requirepass', 'right-password');
    admin.disconnect();
  }
}, 30_000);
afterAll(async () => {
  await closeAllClients();
  await cluster?.stop();
});

it('ready() on a Cluster that refuses the password rejects at once, quoting WRONGPASS', async () => {
  const client = trackClient(
    new Cluster(cluster!.startupNodes, { redisOptions: { password: 'wrong-password' } }),
  );
  client.on('error', () => {});
  const store = new RedisStore({ client });
  const started = Date.now();
  const outcome = await store.ready().then(
    () => 'resolved',
    (err: unknown) => err,
  );
  expect(outcome).toBeInstanceOf(StoreError);
  expect((outcome as StoreError).message).toMatch(/authentication: WRONGPASS/);
  expect(Date.now() - started, 'well before the 10 s bound').toBeLessThan(5000);
  await store.close();
});
