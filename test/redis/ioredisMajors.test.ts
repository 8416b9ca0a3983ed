/**
 * ioredis is the user's peer dependency (^5 || ^6): the same RedisStore must run on either major,
 * and on ioredis 6 over RESP2 and RESP3 (with both of its reply mappings). Each client runs every
 * algorithm through a Limiter against a real redis-server whose eviction policy also makes the
 * store's start-up check speak.
 */
import { Cluster as Cluster5, Redis as Redis5 } from 'ioredis';
import { Cluster as Cluster6, Redis as Redis6 } from 'ioredis6';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { Limiter, type PolicyConfig, RedisStore } from '../../src/index.js';
import { uniquePrefix } from '../support/clients.js';
import { eventually } from '../support/eventually.js';
import { type RedisProcess, startRedis } from '../support/redisServer.js';

let server: RedisProcess;
beforeAll(async () => {
  server = await startRedis({ extraArgs: ['--maxmemory-policy', 'allkeys-lru'] });
});
afterAll(async () => {
  await server?.stop();
});

const POLICIES: Record<string, PolicyConfig> = {
  bucket: { algorithm: 'token-bucket', rate: 1, period: '1d', burst: 3 },
  leasedBucket: { algorithm: 'token-bucket', rate: 1, period: '1d', burst: 100 },
  window: { algorithm: 'fixed-window', limit: 2, window: '1d' },
  sliding: { algorithm: 'sliding-window', limit: 2, window: '1h' },
  log: { algorithm: 'sliding-log', limit: 2, window: '1h' },
  shaper: { algorithm: 'leaky-bucket', rate: 1, period: '1h', burst: 2 },
  slots: { algorithm: 'concurrency', limit: 1, slotTtl: '1m' },
};

/** A user's client of each kind; every one must type-check as `RedisStore`'s `client`. */
const SINGLE = {
  'ioredis 5, RESP2': { resp: 2, connect: (url: string) => new Redis5(url) },
  'ioredis 6, RESP2': { resp: 2, connect: (url: string) => new Redis6(url, { protocol: 2 }) },
  'ioredis 6, its default protocol (RESP3)': { resp: 3, connect: (url: string) => new Redis6(url) },
  'ioredis 6, RESP3': { resp: 3, connect: (url: string) => new Redis6(url, { protocol: 3 }) },
  'ioredis 6, RESP3 with replyMapping resp3': {
    resp: 3,
    connect: (url: string) => new Redis6(url, { protocol: 3, replyMapping: 'resp3' }),
  },
};

async function allowedRun(limiter: Limiter, policy: string, key: string, n: number): Promise<boolean[]> {
  const out: boolean[] = [];
  for (let i = 0; i < n; i++) out.push((await limiter.consume(policy, key)).allowed);
  return out;
}

describe.each(Object.entries(SINGLE))('RedisStore on %s', (_name, { resp, connect }) => {
  it('decides every algorithm, leaves TTLs on its keys, warns about eviction and closes its connection', async () => {
    const user = connect(server.url);
    const warnings: string[] = [];
    const prefix = uniquePrefix('majors');
    const store = new RedisStore({
      client: user,
      prefix,
      timeoutMs: 2000,
      onWarning: (m) => warnings.push(m),
    });
    await store.ready();
    expect(String(await store.client.call('CLIENT', 'INFO')), "protocol of the store's connection").toMatch(
      new RegExp(`\\bresp=${resp}\\b`),
    );
    const limiter = new Limiter({ store, policies: POLICIES, sweepIntervalMs: 0 });

    expect(await allowedRun(limiter, 'bucket', 'k', 4), 'token bucket, burst 3').toEqual([
      true,
      true,
      true,
      false,
    ]);
    const denied = await limiter.consume('bucket', 'k');
    expect(denied.retryAfterMs, 'retry after one token refills (1 per day)').toBeGreaterThan(3_600_000);
    expect(await allowedRun(limiter, 'leasedBucket', 'k', 50), 'leased bucket').toEqual(Array(50).fill(true));
    expect(await allowedRun(limiter, 'window', 'k', 3), 'fixed window, limit 2').toEqual([true, true, false]);
    expect(await allowedRun(limiter, 'sliding', 'k', 3), 'sliding window, limit 2').toEqual([
      true,
      true,
      false,
    ]);
    expect(await allowedRun(limiter, 'log', 'k', 3), 'sliding log, limit 2').toEqual([true, true, false]);
    expect(await allowedRun(limiter, 'shaper', 'k', 3), 'leaky bucket, burst 2').toEqual([true, true, false]);
    const slot = await limiter.acquire('slots', 'k');
    expect(slot.allowed, 'first slot').toBe(true);
    expect((await limiter.acquire('slots', 'k')).allowed, 'second slot while the first is held').toBe(false);
    await slot.release();
    const again = await limiter.acquire('slots', 'k');
    expect(again.allowed, 'a slot after release').toBe(true);
    await again.release();
    await limiter.close();

    const admin = new Redis5(server.url);
    const keys = await admin.keys(`${prefix}*`);
    expect(keys.length, 'one key per policy and client key').toBeGreaterThanOrEqual(6);
    for (const key of keys) expect(await admin.pttl(key), `TTL of ${key}`).toBeGreaterThan(0);
    const bucketKey = keys.find((k) => k.includes('leasedBucket'));
    expect(bucketKey, 'the leased bucket key').toBeDefined();
    await admin.quit();

    expect(warnings.join('\n'), 'the eviction warning names the policy').toMatch(
      /maxmemory-policy is allkeys-lru/,
    );
    expect(store.client, 'the store ran on its own duplicate').not.toBe(user);
    await store.close();
    await eventually(async () =>
      expect(store.client.status, "the store's duplicate is closed by store.close()").toBe('end'),
    );
    expect(user.status, "the user's client is left open").toBe('ready');
    await user.quit();
  });
});

describe.each([
  ['ioredis 5', () => new Cluster5(inject('clusterNodes'))],
  ['ioredis 6, RESP2', () => new Cluster6(inject('clusterNodes'), { redisOptions: { protocol: 2 } })],
  ['ioredis 6, its default protocol (RESP3)', () => new Cluster6(inject('clusterNodes'))],
  ['ioredis 6, RESP3', () => new Cluster6(inject('clusterNodes'), { redisOptions: { protocol: 3 } })],
] as const)('RedisStore on a Cluster client of %s', (_name, connect) => {
  it('decides on keys spread over the masters and closes its connection', async () => {
    const user = connect();
    const store = new RedisStore({ client: user, prefix: uniquePrefix('majors-cluster'), timeoutMs: 2000 });
    await store.ready();
    const limiter = new Limiter({ store, policies: POLICIES, sweepIntervalMs: 0 });
    for (const key of ['a', 'b', 'c', 'd', 'e', 'f']) {
      expect(await allowedRun(limiter, 'bucket', key, 4), `token bucket for ${key}`).toEqual([
        true,
        true,
        true,
        false,
      ]);
      expect(await allowedRun(limiter, 'log', key, 3), `sliding log for ${key}`).toEqual([true, true, false]);
    }
    await limiter.close();
    await store.close();
    // A Cluster that was disconnected on purpose stays in 'close' (it never reconnects).
    await eventually(async () =>
      expect(['close', 'end'], "the store's duplicate is closed").toContain(store.client.status),
    );
    await user.quit();
  });
});
