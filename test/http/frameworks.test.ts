import { once } from 'node:events';
import http, { type Server } from 'node:http';
import express from 'express';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { rateLimit as expressRateLimit } from '../../src/http/express.js';
import { rateLimitPlugin } from '../../src/http/fastify.js';
import {
  rateLimit as nodeRateLimit,
  Plans,
  type RateLimitInfo,
  rolloutPosition,
} from '../../src/http/index.js';
import type { Limiter } from '../../src/index.js';
import { memoryLimiter, parseRateLimit, tokenBucket, virtualClock } from './servers.js';

let cleanup: (() => Promise<unknown> | unknown)[] = [];
afterEach(async () => {
  for (const fn of cleanup.reverse()) await fn();
  cleanup = [];
});

async function listen(server: Server): Promise<string> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  cleanup.push(() => {
    server.closeAllConnections();
    return new Promise((resolve) => server.close(resolve));
  });
  return `http://127.0.0.1:${(server.address() as { port: number }).port}`;
}

async function listenFastify(app: FastifyInstance): Promise<string> {
  await app.listen({ port: 0, host: '127.0.0.1' });
  cleanup.push(() => app.close());
  return `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
}

function limiterFor(policies: Parameters<typeof memoryLimiter>[0]) {
  const clock = virtualClock();
  const limiter = memoryLimiter(policies, clock.now);
  cleanup.push(() => limiter.close());
  return { clock, limiter };
}

describe('Express', () => {
  it('sends refusals through a custom handler and exposes the decision under requestPropertyName', async () => {
    const { clock, limiter } = limiterFor({ p: tokenBucket(1, '1m', 1) });
    const app = express();
    app.use(
      expressRateLimit({
        limiter,
        rules: [{ policy: 'p' }],
        now: clock.now,
        requestPropertyName: 'quota',
        handler: (_req, res, _next, refusal) => {
          res.status(refusal.status).json({ slowDown: refusal.retryAfter, reason: refusal.reason });
        },
      }),
    );
    app.get('/x', (req, res) => {
      res.json({ remaining: (req as unknown as { quota: RateLimitInfo }).quota.remaining });
    });
    const url = await listen(http.createServer(app));
    expect(await (await fetch(`${url}/x`)).json()).toEqual({ remaining: 0 });
    const refused = await fetch(`${url}/x`);
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('60');
    expect(await refused.json()).toEqual({ slowDown: 60, reason: 'limited' });
  });

  it("passes a throwing keyGenerator's and a rejecting handler's errors to Express's error handler", async () => {
    const { clock, limiter } = limiterFor({ p: tokenBucket(1, '1m', 1) });
    const app = express();
    const fail = (message: string) => () => {
      throw new Error(message);
    };
    const ok = (_req: express.Request, res: express.Response) => res.send('ok');
    const rules = [{ policy: 'p' }];
    app.get('/key', expressRateLimit({ limiter, rules, now: clock.now, keyGenerator: fail('no key') }), ok);
    const handler = async () => fail('handler failed')();
    app.get('/handler', expressRateLimit({ limiter, rules, now: clock.now, handler }), ok);
    app.use((err: Error, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
      res.status(500).send(`caught: ${err.message}`);
    });
    const url = await listen(http.createServer(app));
    const key = await fetch(`${url}/key`);
    expect([key.status, await key.text()]).toEqual([500, 'caught: no key']);
    expect((await fetch(`${url}/handler`)).status, 'the first request is within the limit').toBe(200);
    const refused = await fetch(`${url}/handler`);
    expect([refused.status, await refused.text()]).toEqual([500, 'caught: handler failed']);
  });

  it('switches to draft-7 and legacy headers, and skips what skip() says', async () => {
    const { clock, limiter } = limiterFor({ p: tokenBucket(10, '10s') });
    const app = express();
    app.use(
      expressRateLimit({
        limiter,
        rules: [{ policy: 'p' }],
        standardHeaders: 'draft-7',
        legacyHeaders: true,
        skip: (req) => req.path === '/health',
        now: clock.now,
      }),
    );
    app.get('/x', (_req, res) => {
      res.send('ok');
    });
    app.get('/health', (_req, res) => {
      res.send('ok');
    });
    const url = await listen(http.createServer(app));
    const res = await fetch(`${url}/x`);
    expect(res.headers.get('ratelimit-policy')).toBe('10;w=10');
    expect(res.headers.get('ratelimit')).toBe('limit=10, remaining=9, reset=1');
    expect(res.headers.get('x-ratelimit-limit')).toBe('10');
    expect(res.headers.get('x-ratelimit-remaining')).toBe('9');
    expect(res.headers.get('x-ratelimit-reset')).toBe(String(Math.ceil(clock.now() / 1000) + 1));
    const health = await fetch(`${url}/health`);
    expect(health.headers.get('ratelimit'), 'skipped').toBeNull();
  });

  it('keys by the route pattern when mounted on a route', async () => {
    const { clock, limiter } = limiterFor({ heavy: tokenBucket(1, '1m', 2) });
    const app = express();
    app.get(
      '/users/:id',
      expressRateLimit({ limiter, rules: [{ policy: 'heavy', by: 'route' }], now: clock.now }),
      (_req, res) => {
        res.send('ok');
      },
    );
    const url = await listen(http.createServer(app));
    const statuses = [];
    for (const id of [1, 2, 3]) statuses.push((await fetch(`${url}/users/${id}`)).status);
    expect(statuses, '/users/1, /2 and /3 are one route').toEqual([200, 200, 429]);
  });
});

describe('Fastify', () => {
  it('takes per-route config: a cost, or false for no limit', async () => {
    const { clock, limiter } = limiterFor({ p: tokenBucket(25, '10s') });
    const app = Fastify();
    await app.register(rateLimitPlugin, { limiter, rules: [{ policy: 'p' }], now: clock.now });
    app.post('/reports', { config: { rateLimit: { cost: 20 } } }, async () => 'report');
    app.get('/profile', async () => 'profile');
    app.get('/health', { config: { rateLimit: false } }, async () => 'ok');
    const url = await listenFastify(app);
    const report = await fetch(`${url}/reports`, { method: 'POST' });
    expect(parseRateLimit(report.headers.get('ratelimit'))[0]?.r).toBe(5);
    expect((await fetch(`${url}/reports`, { method: 'POST' })).status).toBe(429);
    expect((await fetch(`${url}/profile`)).status).toBe(200);
    for (let i = 0; i < 30; i++) {
      const health = await fetch(`${url}/health`);
      expect(health.status).toBe(200);
      expect(health.headers.get('ratelimit')).toBeNull();
    }
  });

  it('builds the refusal with errorResponseBuilder, calls onExceeded with the key, honours allowList and hook', async () => {
    const { clock, limiter } = limiterFor({ p: tokenBucket(1, '1m', 1) });
    const exceeded: string[] = [];
    const app = Fastify();
    await app.register(rateLimitPlugin, {
      limiter,
      rules: [{ policy: 'p', by: 'apiKey' }],
      hook: 'preHandler',
      allowList: (req) => req.headers['x-api-key'] === 'k_internal',
      onExceeded: (_req, key) => exceeded.push(key),
      errorResponseBuilder: (_req, context) => ({
        code: 'SLOW_DOWN',
        after: context.after,
        max: context.max,
      }),
      now: clock.now,
    });
    app.get('/x', async (req) => ({ limited: req.rateLimit !== undefined }));
    const url = await listenFastify(app);
    const get = (key: string) => fetch(`${url}/x`, { headers: { 'x-api-key': key } });
    expect(await (await get('k_1')).json()).toEqual({ limited: true });
    const refused = await get('k_1');
    expect(refused.status).toBe(429);
    expect(await refused.json()).toEqual({ code: 'SLOW_DOWN', after: '60 seconds', max: 1 });
    expect(exceeded).toEqual(['ip=127.0.0.1']);
    for (let i = 0; i < 3; i++) expect((await get('k_internal')).status, 'allow-listed').toBe(200);
  });

  it('limits only configured routes with global: false, keyed by the route pattern', async () => {
    const { clock, limiter } = limiterFor({ p: tokenBucket(1, '1m', 1) });
    const app = Fastify();
    await app.register(rateLimitPlugin, {
      limiter,
      rules: [{ policy: 'p', by: 'route' }],
      global: false,
      now: clock.now,
    });
    app.get('/users/:id', { config: { rateLimit: {} } }, async () => 'user');
    app.get('/free', async () => 'free');
    const url = await listenFastify(app);
    expect((await fetch(`${url}/users/1`)).status).toBe(200);
    expect((await fetch(`${url}/users/2`)).status, 'same pattern').toBe(429);
    expect((await fetch(`${url}/free`)).headers.get('ratelimit-policy')).toBeNull();
  });
});

describe('node:http', () => {
  async function nodeServer(limiter: Limiter, options: Omit<Parameters<typeof nodeRateLimit>[0], 'limiter'>) {
    const limit = nodeRateLimit({ limiter, ...options });
    return listen(
      http.createServer(async (req, res) => {
        if (!(await limit(req, res))) return;
        res.end('ok');
      }),
    );
  }

  it('hides remaining on public routes only, but still says when to retry', async () => {
    const { clock, limiter } = limiterFor({ p: tokenBucket(1, '1m', 2) });
    const url = await nodeServer(limiter, {
      rules: [{ policy: 'p' }],
      hideRemaining: ['/public/*'],
      now: clock.now,
    });
    const internal = await fetch(`${url}/internal`);
    expect(internal.headers.get('ratelimit')).toBe('"p";r=1;t=60');
    const pub = await fetch(`${url}/public/page`);
    expect(pub.headers.get('ratelimit-policy')).toBe('"p";q=2;w=120');
    expect(pub.headers.get('ratelimit'), 'remaining hidden').toBeNull();
    const refused = await fetch(`${url}/public/page`);
    expect(refused.status).toBe(429);
    expect(refused.headers.get('ratelimit'), 'a refusal names the rule with r=0').toBe('"p";r=0;t=60');
  });

  it('enforces for the percentage of clients the stable hash picks, and shadows the rest', async () => {
    const { clock, limiter } = limiterFor({ p: tokenBucket(1, '1m', 1) });
    const shadowed: string[] = [];
    const url = await nodeServer(limiter, {
      rules: [{ policy: 'p', by: 'ip', enforce: 30 }],
      trustProxy: ['loopback'],
      onShadowExceeded: (_req, info) => shadowed.push(info.key),
      now: clock.now,
    });
    const clients = Array.from({ length: 40 }, (_, i) => `198.51.100.${i + 1}`);
    const refused: string[] = [];
    for (const ip of clients) {
      await fetch(url, { headers: { 'x-forwarded-for': ip } });
      const second = await fetch(url, { headers: { 'x-forwarded-for': ip } });
      if (second.status === 429) refused.push(ip);
    }
    const expected = clients.filter((ip) => rolloutPosition(`ip=${ip}`) < 30);
    expect(refused).toEqual(expected);
    expect(expected.length, 'the sample has both kinds').toBeGreaterThan(0);
    expect(shadowed.length).toBe(clients.length - expected.length);
  });

  it('refuses deny-listed clients with 403 and lets allow-listed ones through uncounted', async () => {
    const { clock, limiter } = limiterFor({ p: tokenBucket(1, '1m', 1) });
    const url = await nodeServer(limiter, {
      rules: [{ policy: 'p' }],
      trustProxy: 1,
      denyList: ['203.0.113.0/24', 'k_leaked'],
      allowList: ['198.51.100.9'],
      now: clock.now,
    });
    const from = (ip: string, key?: string) =>
      fetch(url, { headers: { 'x-forwarded-for': ip, ...(key ? { 'x-api-key': key } : {}) } });
    expect((await from('203.0.113.50')).status).toBe(403);
    expect((await from('192.0.2.1', 'k_leaked')).status).toBe(403);
    for (let i = 0; i < 3; i++) expect((await from('198.51.100.9')).status).toBe(200);
  });

  it('answers 503, not 500, when the limiter lost a policy a rule names, and reports it', async () => {
    const { clock, limiter } = limiterFor({ p: tokenBucket(10), other: tokenBucket(10) });
    const errors: unknown[] = [];
    const url = await nodeServer(limiter, {
      rules: [{ policy: 'p' }],
      onError: (e) => errors.push(e),
      now: clock.now,
    });
    expect((await fetch(url)).status).toBe(200);
    limiter.setPolicies({ other: tokenBucket(10) });
    const res = await fetch(url);
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('1');
    expect(String(errors[0])).toMatch(/unknown policy "p"/);
  });

  it('counts spellings of one path as one route: slashes and escaped unreserved characters', async () => {
    const { clock, limiter } = limiterFor({ p: tokenBucket(1, '1m', 2) });
    const url = await nodeServer(limiter, { rules: [{ policy: 'p', by: 'route' }], now: clock.now });
    const statuses = [];
    for (const path of ['/a/b', '//a//b/', '/%61/b']) statuses.push((await fetch(`${url}${path}`)).status);
    expect(statuses).toEqual([200, 200, 429]);
    expect((await fetch(`${url}/a/c`)).status, 'another route').toBe(200);
  });

  it('rejects bad options eagerly, naming the option', () => {
    const { limiter } = limiterFor({ p: tokenBucket(10) });
    expect(() => nodeRateLimit({ limiter, rules: [] })).toThrow(
      'Invalid `rules`: expected at least one rule',
    );
    expect(() => nodeRateLimit({ limiter, rules: [{ policy: 'q' }] })).toThrow(
      'Invalid `rules[0].policy`: the limiter has no policy "q"',
    );
    expect(() => nodeRateLimit({ limiter, rules: [{ policy: 'p', by: 'tenant' as never }] })).toThrow(
      'Invalid `rules[0].by`',
    );
    expect(() => nodeRateLimit({ limiter, rules: [{ policy: 'p' }], statusCode: 200 })).toThrow(
      'Invalid `statusCode`',
    );
    expect(() => nodeRateLimit({ limiter, rules: [{ policy: 'p' }], costs: { '/x': -1 } })).toThrow(
      'Invalid `costs["/x"]`: expected a positive number, got -1',
    );
    expect(() => nodeRateLimit({ limiter, rules: [{ policy: 'p' }], trustProxy: ['nope'] })).toThrow(
      'Invalid `trustProxy[0]`',
    );
    expect(() => nodeRateLimit({ limiter: {} as Limiter, rules: [{ policy: 'p' }] })).toThrow(
      'Invalid `limiter`',
    );
    const plans = Plans.parse('rules: { r: { rate: 1 } }');
    expect(() => nodeRateLimit({ limiter, plans })).toThrow(
      'Invalid `limiter`: has no policy "*/r" of the plans; create it with `policies: plans.policies`',
    );
    expect(() => nodeRateLimit({ limiter, plans, rules: [{ policy: 'p' }] })).toThrow(
      'Invalid `rules`: with `plans`, put rules and costs in the plans file',
    );
  });

  it('answers a request costing more than the limit with 429 and no Retry-After', async () => {
    const { clock, limiter } = limiterFor({ p: tokenBucket(1, '1m', 5) });
    const url = await nodeServer(limiter, { rules: [{ policy: 'p' }], cost: 6, now: clock.now });
    const res = await fetch(url);
    expect(res.status).toBe(429);
    expect(res.headers.get('retry-after')).toBeNull();
    expect(res.headers.get('ratelimit')).toBe('"p";r=0');
    expect(((await res.json()) as { message: string }).message).toMatch(/will never be accepted/);
  });
});
