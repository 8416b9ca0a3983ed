import { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { Limiter, RedisStore } from '../../src/index.js';
import { closeAllClients, redisClient, trackClient, uniquePrefix } from '../support/clients.js';
import { startRedis } from '../support/redisServer.js';
import { parseRateLimit, startServer, tokenBucket, virtualClock } from './servers.js';

afterAll(closeAllClients);

let cleanup: (() => Promise<unknown> | unknown)[] = [];
afterEach(async () => {
  for (const fn of cleanup.reverse()) await fn();
  cleanup = [];
});

describe('HTTP rate limiting on a RedisStore', () => {
  it('refuses the (N+1)-th request and admits the retry after Retry-After, with state in real Redis', async () => {
    const clock = virtualClock();
    const store = new RedisStore({
      client: redisClient(),
      prefix: uniquePrefix('http'),
      timeoutMs: 2000,
      now: clock.now,
    });
    await store.ready();
    const limiter = new Limiter({
      store,
      policies: { 'per-key': tokenBucket(1, '5s', 3) },
      now: clock.now,
      sweepIntervalMs: 0,
    });
    const server = await startServer('express', {
      limiter,
      rules: [{ policy: 'per-key', by: 'apiKey' }],
      now: clock.now,
    });
    cleanup.push(
      () => store.close(),
      () => limiter.close(),
      () => server.close(),
    );
    const get = () => fetch(`${server.url}/profile`, { headers: { 'x-api-key': 'k_redis' } });
    const statuses = [];
    for (let i = 0; i < 3; i++) statuses.push((await get()).status);
    expect(statuses).toEqual([200, 200, 200]);
    const refused = await get();
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('5');
    expect(parseRateLimit(refused.headers.get('ratelimit'))).toEqual([{ name: 'per-key', r: 0, t: 5 }]);
    clock.advance(5000);
    expect((await get()).status).toBe(200);
  });

  it("answers by each rule's fail policy when Redis is down: 'closed' refuses with Retry-After, 'open' lets through", async () => {
    const redis = await startRedis();
    cleanup.push(() => redis.stop());
    const client = trackClient(
      new Redis(redis.url, {
        enableOfflineQueue: false,
        autoResendUnfulfilledCommands: false,
        maxRetriesPerRequest: 0,
      }),
    );
    client.on('error', () => {});
    const store = new RedisStore({ client, timeoutMs: 200 });
    await store.ready();
    const errors: unknown[] = [];
    // The limiter applies the fail policy, so the HTTP layer sees decisions, not store errors.
    const closed = new Limiter({
      store,
      policies: { p: { algorithm: 'token-bucket', rate: 100, fail: 'closed' } },
      sweepIntervalMs: 0,
    });
    const open = new Limiter({
      store,
      policies: { p: { algorithm: 'token-bucket', rate: 100, fail: 'open' } },
      sweepIntervalMs: 0,
    });
    // Keyed by API key, so a key never seen before needs a store call.
    const rules = [{ policy: 'p', by: 'apiKey' as const }];
    const failClosed = await startServer('node', { limiter: closed, rules, onError: (e) => errors.push(e) });
    const failOpen = await startServer('fastify', { limiter: open, rules, onError: (e) => errors.push(e) });
    cleanup.push(
      () => closed.close(),
      () => open.close(),
      () => failClosed.close(),
      () => failOpen.close(),
    );
    const get = (url: string, key: string) => fetch(`${url}/profile`, { headers: { 'x-api-key': key } });
    expect((await get(failClosed.url, 'k_1')).status, 'while Redis is up').toBe(200);

    await redis.kill();
    const refused = await get(failClosed.url, 'k_2');
    expect(refused.status, 'fail closed').toBe(429);
    expect(refused.headers.get('retry-after'), 'until the store is probed again').toBe('1');
    const passed = await get(failOpen.url, 'k_3');
    expect(passed.status, 'fail open').toBe(200);
    expect(closed.stats().fallbackDecisions + open.stats().fallbackDecisions).toBe(2);
    expect(errors, "store failures are the fail policy's to handle, not errors").toEqual([]);
  });
});
