import { IncomingMessage, ServerResponse } from 'node:http';
import express from 'express';
import Fastify from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { rateLimit as expressRateLimit } from '../../src/http/express.js';
import { rateLimitPlugin } from '../../src/http/fastify.js';
import { type NodeRateLimit, type RateLimitInfo, rateLimit } from '../../src/http/index.js';
import { Limiter, MemoryStore } from '../../src/index.js';

// A lease hit is decided from local state: the adapters apply it in the turn the request came in
// (headers set, `next` called), with no promise of their own for it to wait behind. A store call
// still goes through its promise.

const limiters: Limiter[] = [];
afterEach(async () => {
  await Promise.all(limiters.splice(0).map((l) => l.close()));
});

function limiter(): Limiter {
  const l = new Limiter({
    store: new MemoryStore(),
    policies: { 'per-client': { algorithm: 'token-bucket', rate: 1000, period: '1s', burst: 1000 } },
  });
  limiters.push(l);
  return l;
}

function request(): IncomingMessage {
  const req = new IncomingMessage({ remoteAddress: '127.0.0.1' } as never);
  req.method = 'GET';
  req.url = '/';
  req.headers = { host: 'api' };
  return req;
}

/** Per request: where the decision came from, and whether it was applied before the call returned. */
type Seen = { source: string | undefined; sameTurn: boolean };

/** Requests until the key's leases are warm: every lease hit must have been applied in its turn. */
function expectLeaseHitsInTurn(seen: readonly Seen[]): void {
  expect(seen[0]).toEqual({ source: 'store', sameTurn: false });
  const hits = seen.filter((s) => s.source === 'lease');
  expect(hits.length).toBeGreaterThan(10);
  expect(hits.every((s) => s.sameTurn)).toBe(true);
}

/** 30 requests through a node:http `rateLimit`, each admitted: lease hits once every rule decided from a lease. */
async function throughNode(limit: NodeRateLimit): Promise<Seen[]> {
  const seen: Seen[] = [];
  for (let i = 0; i < 30; i++) {
    const req = request();
    const res = new ServerResponse(req);
    const passed = limit(req, res);
    const sameTurn = res.getHeader('ratelimit') !== undefined;
    expect(await passed).toBe(true);
    const info = (req as unknown as { rateLimit: RateLimitInfo }).rateLimit;
    const leased = info.rules.every((r) => r.decision?.source === 'lease');
    seen.push({ source: leased ? 'lease' : 'store', sameTurn });
  }
  return seen;
}

/** A Fastify app with the plugin over one bucket of `burst` that does not refill during a test. */
async function fastifyWith(burst: number) {
  const app = Fastify();
  const l = new Limiter({
    store: new MemoryStore(),
    policies: { one: { algorithm: 'token-bucket', rate: 1, period: '1h', burst } },
  });
  limiters.push(l);
  await app.register(rateLimitPlugin, { limiter: l, rules: [{ policy: 'one' }] });
  return app;
}

describe('decided in the turn the request came in, on a lease hit', () => {
  it('node:http: the headers are on the response before the returned promise is awaited', async () => {
    const limit = rateLimit({ limiter: limiter(), rules: [{ policy: 'per-client', by: 'ip' }] });
    expectLeaseHitsInTurn(await throughNode(limit));
  });

  it('node:http with observers and two rules: consume(checks) answers in the turn too', async () => {
    const routes: (string | undefined)[] = [];
    const l = new Limiter({
      store: new MemoryStore(),
      policies: {
        'per-client': { algorithm: 'token-bucket', rate: 1000, period: '1s', burst: 1000 },
        daily: { algorithm: 'token-bucket', rate: 100_000, period: '1d' },
      },
      observers: [{ decision: (e) => routes.push(e.route) }],
    });
    limiters.push(l);
    const limit = rateLimit({ limiter: l, rules: [{ policy: 'per-client' }, { policy: 'daily' }] });
    expectLeaseHitsInTurn(await throughNode(limit));
    expect(new Set(routes)).toEqual(new Set(['GET /']));
  });

  it('Express: next() is called before the middleware returns', async () => {
    const middleware = expressRateLimit({ limiter: limiter(), rules: [{ policy: 'per-client' }] });
    const app = express();
    const seen: Seen[] = [];
    for (let i = 0; i < 30; i++) {
      const req = Object.setPrototypeOf(request(), app.request) as express.Request;
      const res = Object.setPrototypeOf(new ServerResponse(req), app.response) as express.Response;
      let returned = false;
      let sameTurn = false;
      await new Promise<void>((resolve, reject) => {
        middleware(req, res, (err?: unknown) => {
          sameTurn = !returned;
          if (err) reject(err);
          else resolve();
        });
        returned = true;
      });
      seen.push({ source: req.rateLimit?.rules[0]?.decision?.source, sameTurn });
    }
    expectLeaseHitsInTurn(seen);
  });

  it('Fastify: a refusal that waited for the store does not run the route after its 429', async () => {
    const app = await fastifyWith(1);
    let ran = 0;
    app.get('/', async () => {
      ran++;
      return 'ok';
    });
    const replies = [];
    for (let i = 0; i < 3; i++) replies.push(await app.inject({ url: '/' }));
    // The second is refused by the store (its lease of one was spent), the third by what it learnt.
    expect(replies.map((r) => r.statusCode)).toEqual([200, 429, 429]);
    expect(replies.slice(1).map((r) => r.json())).toEqual([
      expect.objectContaining({ error: 'rate_limited' }),
      expect.objectContaining({ error: 'rate_limited' }),
    ]);
    expect(ran, 'the route ran for the admitted request only').toBe(1);
    await app.close();
  });

  it('Fastify: a callback hook that lets the route run, and refuses with a sent reply', async () => {
    const app = await fastifyWith(2);
    app.get('/', async () => 'ok');
    const statuses: number[] = [];
    for (let i = 0; i < 3; i++) statuses.push((await app.inject({ url: '/' })).statusCode);
    expect(statuses).toEqual([200, 200, 429]);
    await app.close();
  });
});
