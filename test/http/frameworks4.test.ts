/**
 * Express 4 and Fastify 4, which the peer ranges accept: the adapters import neither framework, so
 * what is checked is that each answers through the older framework as through the new one, with a
 * limiter (rules) and with the peers' own options (express-rate-limit's, @fastify/rate-limit's).
 * The frameworks are installed under aliases (`express4`, `fastify4`) beside Express 5 and Fastify 5.
 */
import express4 from 'express4';
import Fastify4 from 'fastify4';
import request from 'supertest';
import { afterEach, describe, expect, it } from 'vitest';
import { rateLimit as expressRateLimit } from '../../src/http/express.js';
import fastifyRateLimit, { rateLimitPlugin } from '../../src/http/fastify.js';
import type { RateLimitInfo } from '../../src/http/index.js';
import { memoryLimiter, parseRateLimit, tokenBucket, virtualClock } from './servers.js';

const cleanup: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const done of cleanup.splice(0)) await done();
});

function limiter() {
  const clock = virtualClock();
  const l = memoryLimiter({ 'per-client': tokenBucket(2, '1m', 2) }, clock.now);
  cleanup.push(() => l.close());
  return { limiter: l, now: clock.now };
}

describe('Express 4', () => {
  it('with a limiter: two admitted with headers and req.rateLimit, then a 429 with Retry-After', async () => {
    const { limiter: l, now } = limiter();
    const app = express4();
    app.use(expressRateLimit({ limiter: l, rules: [{ policy: 'per-client' }], now }));
    app.get('/', (req, res) => {
      res.json({ left: req.rateLimit?.remaining });
    });
    const first = await request(app).get('/');
    const second = await request(app).get('/');
    const third = await request(app).get('/');
    expect([first.status, second.status, third.status]).toEqual([200, 200, 429]);
    expect([first.body, second.body]).toEqual([{ left: 1 }, { left: 0 }]);
    expect(parseRateLimit(first.headers.ratelimit ?? null)).toEqual([{ name: 'per-client', r: 1, t: 30 }]);
    expect(third.headers['retry-after']).toBe('30');
  });

  it("with express-rate-limit's options: the limit per window and its legacy headers", async () => {
    const app = express4();
    app.use(expressRateLimit({ windowMs: 60_000, limit: 2 }));
    app.get('/', (_req, res) => {
      res.send('ok');
    });
    const statuses: number[] = [];
    let last: request.Response | undefined;
    for (let i = 0; i < 3; i++) {
      last = await request(app).get('/');
      statuses.push(last.status);
    }
    expect(statuses).toEqual([200, 200, 429]);
    expect(last?.headers['x-ratelimit-limit']).toBe('2');
    expect(last?.headers['x-ratelimit-remaining']).toBe('0');
  });
});

describe('Fastify 4', () => {
  it('the plugin with a limiter: two admitted with headers, then a 429', async () => {
    const { limiter: l, now } = limiter();
    const app = Fastify4();
    cleanup.push(() => app.close());
    await app.register(rateLimitPlugin as never, { limiter: l, rules: [{ policy: 'per-client' }], now });
    app.get('/', async (req) => ({
      left: (req as unknown as { rateLimit?: RateLimitInfo }).rateLimit?.remaining,
    }));
    const replies = [];
    for (let i = 0; i < 3; i++) replies.push(await app.inject({ url: '/' }));
    expect(replies.map((r) => r.statusCode)).toEqual([200, 200, 429]);
    expect(replies[0]!.json()).toEqual({ left: 1 });
    expect(parseRateLimit(String(replies[1]!.headers.ratelimit))).toEqual([
      { name: 'per-client', r: 0, t: 60 },
    ]);
  });

  it("with @fastify/rate-limit's options: max per timeWindow and its headers", async () => {
    const app = Fastify4();
    cleanup.push(() => app.close());
    await app.register(fastifyRateLimit as never, { max: 2, timeWindow: '1 minute' });
    app.get('/', async () => 'ok');
    const replies = [];
    for (let i = 0; i < 3; i++) replies.push(await app.inject({ url: '/' }));
    expect(replies.map((r) => r.statusCode)).toEqual([200, 200, 429]);
    expect(replies[0]!.headers['x-ratelimit-limit']).toBe('2');
    expect(replies[2]!.headers['retry-after']).toBe('60');
  });
});
