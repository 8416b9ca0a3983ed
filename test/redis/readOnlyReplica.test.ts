import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { Limiter, RedisStore, StoreUnavailableError } from '../../src/index.js';
import { tokenBucketAcquire } from '../../src/stores/tokenBucketOps.js';
import { closeAllClients, trackClient } from '../support/clients.js';
import { type RedisProcess, startRedis } from '../support/redisServer.js';

// A gateway pointed at a read-only replica (a wrong REDIS_URL, or a Sentinel setup that failed
// over under it) got ready() and then silently answered every decision by its fail policy: every
// script writes, and a replica answers READONLY. The store now says so at start, as it does for an
// evicting maxmemory-policy.

let primary: RedisProcess | undefined;
let replica: RedisProcess | undefined;
beforeAll(async () => {
  [primary, replica] = await Promise.all([startRedis(), startRedis()]);
  const admin = new Redis(replica.url);
  await admin.replicaof(primary.host, primary.port);
  admin.disconnect();
});
afterAll(async () => {
  await closeAllClients();
  await Promise.all([primary?.stop(), replica?.stop()]);
});

async function warningsOf(url: string): Promise<string[]> {
  const warnings: string[] = [];
  const client = trackClient(new Redis(url));
  const store = new RedisStore({ client, onWarning: (m) => warnings.push(m) });
  await store.ready();
  const limiter = new Limiter({ store, policies: { p: { algorithm: 'token-bucket', rate: 10 } } });
  await limiter.consume('p', 'k');
  // The check runs in the background once the connection is ready.
  for (let i = 0; i < 100 && warnings.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
  await limiter.close();
  await store.close();
  return warnings;
}

it('warns once at start when the store is connected to a read-only replica', async () => {
  const warnings = await warningsOf(replica!.url);
  expect(warnings).toHaveLength(1);
  expect(warnings[0]).toMatch(/read-only replica/);
  expect(warnings[0]).toContain(`${primary!.host}:${primary!.port}`);
});

it('says nothing on the primary', async () => {
  expect(await warningsOf(primary!.url)).toEqual([]);
});

it('a call the replica refuses (READONLY) fails as one that did not run', async () => {
  const store = new RedisStore({ client: trackClient(new Redis(replica!.url)), onWarning: () => {} });
  await store.ready();
  const req = { rate: 1, periodMs: 1000, burst: 10, want: 1, min: 1, ahead: 0 };
  const err = await store.run(tokenBucketAcquire, 'k', req).then(
    () => undefined,
    (e: unknown) => e,
  );
  await store.close();
  expect(err, 'READONLY: the script wrote nothing').toBeInstanceOf(StoreUnavailableError);
  expect((err as Error).message).toMatch(/READONLY/);
});
