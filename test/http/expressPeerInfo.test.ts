/**
 * `req.rateLimit` of tokenlease/express used as express-rate-limit (no limiter) has express-rate-limit
 * 8's shape: `limit`, `used`, `remaining`, `resetTime` and `key` in that order, `current` hidden, a
 * plain object. It carried tokenlease's own fields too (`allowed`, `policy`, `retryAfterMs`,
 * `rules` with the internal keys, `shadowExceeded`), so `res.json(req.rateLimit)`, a log line or a
 * `toStrictEqual` differed from express-rate-limit's. They are still there for code that reads
 * them, hidden as `current` is.
 */
import express from 'express';
import request from 'supertest';
import { describe, expect, it } from 'vitest';
import rateLimit, { MemoryStore } from '../../src/http/express.js';

function app(limit: number) {
  const seen: unknown[] = [];
  const a = express();
  a.use(rateLimit({ windowMs: 60_000, limit, store: new MemoryStore(), keyGenerator: () => 'client-1' }));
  a.get('/', (req, res) => {
    seen.push(req.rateLimit);
    res.json(req.rateLimit);
  });
  return { a, seen };
}

describe('req.rateLimit without a limiter (express-rate-limit)', () => {
  it("has express-rate-limit's fields, in its order, and nothing else enumerable", async () => {
    const { a, seen } = app(3);
    const res = await request(a).get('/');
    expect(Object.keys(res.body)).toEqual(['limit', 'used', 'remaining', 'resetTime', 'key']);
    expect(res.body).toMatchObject({ limit: 3, used: 1, remaining: 2, key: 'client-1' });
    const info = seen[0] as Record<string, unknown>;
    expect(Object.getPrototypeOf(info)).toBe(Object.prototype);
    expect(info).toStrictEqual({
      limit: 3,
      used: 1,
      remaining: 2,
      resetTime: expect.any(Date),
      key: 'client-1',
    });
    expect(info.current, 'current is hidden, and equals used').toBe(1);
    expect(Object.keys(info)).not.toContain('current');
  });

  it("counts a refused request in `used`, as express-rate-limit does, and the handler's view agrees", async () => {
    const used: number[] = [];
    const a = express();
    a.use(
      rateLimit({
        windowMs: 60_000,
        limit: 1,
        store: new MemoryStore(),
        keyGenerator: () => 'client-2',
        handler: (req, res) => {
          used.push(req.rateLimit!.used);
          res.status(429).json(req.rateLimit);
        },
      }),
    );
    a.get('/', (_req, res) => {
      res.send('ok');
    });
    await request(a).get('/');
    const refused = await request(a).get('/');
    expect(refused.status).toBe(429);
    expect(Object.keys(refused.body)).toEqual(['limit', 'used', 'remaining', 'resetTime', 'key']);
    expect(refused.body).toMatchObject({ limit: 1, used: 2, remaining: 0, key: 'client-2' });
    expect(used).toEqual([2]);
  });
});
