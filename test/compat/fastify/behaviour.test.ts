// What a migrating @fastify/rate-limit user relies on beyond the upstream suite: the `redis` option
// sharing counts between instances under `nameSpace`, refusals reaching setErrorHandler, and
// Fastify's trustProxy deciding who the client is.
import Fastify from 'fastify';
import { afterAll, describe, expect, it } from 'vitest';
import rateLimit from '../../../src/http/fastify.js';
import { ConfigError, Limiter } from '../../../src/index.js';
import { closeAllClients, redisClient, uniquePrefix } from '../../support/clients.js';

afterAll(closeAllClients);

describe('tokenlease/fastify without a limiter', () => {
  it('`redis` + `nameSpace`: two instances share each client’s window, keys under the namespace', async () => {
    const redis = redisClient();
    const nameSpace = uniquePrefix('frl');
    const apps = [Fastify(), Fastify()];
    for (const app of apps) {
      await app.register(rateLimit, { max: 2, timeWindow: '1 minute', redis, nameSpace });
      app.get('/', async () => 'ok');
    }
    const [a, b] = apps as [ReturnType<typeof Fastify>, ReturnType<typeof Fastify>];
    expect((await a.inject('/')).headers['x-ratelimit-remaining']).toBe('1');
    expect((await b.inject('/')).headers['x-ratelimit-remaining']).toBe('0');
    const refused = await a.inject('/');
    expect(refused.statusCode).toBe(429);
    expect(refused.headers['retry-after']).toBe('60');
    const keys = await redis.keys(`${nameSpace}*`);
    expect(keys.length, 'the counts live under nameSpace').toBeGreaterThan(0);
    for (const key of keys) expect(await redis.pttl(key), `${key} has a TTL`).toBeGreaterThan(0);
    await Promise.all(apps.map((app) => app.close()));
  });

  it('a refusal reaches setErrorHandler as an error with statusCode 429', async () => {
    const app = Fastify();
    await app.register(rateLimit, { max: 1, timeWindow: 1000 });
    let seen: { statusCode?: number; message: string } | undefined;
    app.setErrorHandler((error: { statusCode?: number; message: string }, _req, reply) => {
      seen = error;
      reply.code(error.statusCode ?? 500).send({ custom: true });
    });
    app.get('/', async () => 'ok');
    await app.inject('/');
    const refused = await app.inject('/');
    expect(refused.statusCode).toBe(429);
    expect(refused.json()).toEqual({ custom: true });
    expect(seen).toMatchObject({ statusCode: 429, message: 'Rate limit exceeded, retry in 1 second' });
    await app.close();
  });

  it("Fastify's trustProxy: clients behind the proxy are counted apart; without it, as the proxy", async () => {
    for (const [trustProxy, second] of [
      [true, 200],
      [false, 429],
    ] as const) {
      const app = Fastify({ trustProxy });
      await app.register(rateLimit, { max: 1, timeWindow: 60_000 });
      app.get('/', async () => 'ok');
      await app.inject({ url: '/', headers: { 'x-forwarded-for': '203.0.113.1' } });
      const other = await app.inject({ url: '/', headers: { 'x-forwarded-for': '203.0.113.2' } });
      expect(other.statusCode, `trustProxy ${trustProxy}`).toBe(second);
      await app.close();
    }
  });

  it("with a limiter too, Fastify's trustProxy decides who the client is", async () => {
    const limiter = new Limiter({
      policies: { p: { algorithm: 'fixed-window', limit: 1, window: '1m', lease: 'exact' } },
      sweepIntervalMs: 0,
    });
    const app = Fastify({ trustProxy: true });
    await app.register(rateLimit, { limiter, rules: [{ policy: 'p', by: 'ip' }] });
    app.get('/', async () => 'ok');
    await app.inject({ url: '/', headers: { 'x-forwarded-for': '203.0.113.1' } });
    const other = await app.inject({ url: '/', headers: { 'x-forwarded-for': '203.0.113.2' } });
    expect(other.statusCode, 'another client behind the trusted proxy').toBe(200);
    const again = await app.inject({ url: '/', headers: { 'x-forwarded-for': '203.0.113.1' } });
    expect(again.statusCode).toBe(429);
    await app.close();
    await limiter.close();
  });
});

describe('tokenlease/fastify without a limiter: bad input', () => {
  it.each([['zz'], ['onSend'], [5]])(
    'hook %j is a ConfigError naming `hook` (it silently turned limiting off)',
    async (hook) => {
      const app = Fastify();
      let error: unknown;
      try {
        await app.register(rateLimit, { max: 1, timeWindow: 1000, hook: hook as never });
        app.get('/', async () => 'ok');
        await app.ready();
      } catch (err) {
        error = err;
      }
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).field).toBe('hook');
      await app.close().catch(() => {});
    },
  );
});
