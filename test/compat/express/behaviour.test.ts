// What the not-applicable express-rate-limit tests stand for (their mock stores and Validations
// class), checked through requests against tokenlease itself, plus what a migrating user relies on
// beyond the upstream suite: trust proxy, a shared RedisStore, stacked draft-8 limiters.
import { createHash } from 'node:crypto';
import express, { type Request } from 'express';
import { agent as request } from 'supertest';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { ConfigError, Limiter, MemoryStore, RedisStore } from '../../../src/index.js';
import { closeAllClients, redisClient, uniquePrefix } from '../../support/clients.js';
import { createServer } from './helpers/create-server.js';
import { rateLimit } from './mapping.js';

afterAll(closeAllClients);

const logger = () => ({ error: vi.fn(), warn: vi.fn() });
const codes = (l: ReturnType<typeof logger>) => l.error.mock.calls.map(([e]) => (e as { code: string }).code);

describe('skipSuccessfulRequests / skipFailedRequests give back what the request took', () => {
  it('successful requests do not count with skipSuccessfulRequests; failed ones do', async () => {
    const app = createServer(rateLimit({ limit: 1, skipSuccessfulRequests: true }));
    await request(app).get('/').expect(200);
    await request(app).get('/').expect(200, 'Hi there!');
    await request(app).get('/error').expect(400);
    await request(app).get('/').expect(429);
  });

  it('failed and aborted requests do not count with skipFailedRequests; successful ones do', async () => {
    const app = createServer(rateLimit({ limit: 1, skipFailedRequests: true }));
    let closed!: () => void;
    const aborted = new Promise<void>((resolve) => {
      closed = resolve;
    });
    app.get('/hang', (req) => {
      req.on('close', () => setTimeout(closed, 20));
    });
    await request(app).get('/error').expect(400);
    await request(app).get('/error').expect(400);
    await request(app)
      .get('/hang')
      .timeout(50)
      .catch(() => {});
    await aborted;
    await request(app).get('/').expect(200);
    await request(app).get('/').expect(429);
  });

  it('requestWasSuccessful decides, and may be async', async () => {
    const app = createServer(
      rateLimit({
        limit: 1,
        skipFailedRequests: true,
        requestWasSuccessful: async (req) => req.query.ok === '1',
      }),
    );
    await request(app).get('/?ok=0').expect(200);
    await request(app).get('/?ok=0').expect(200);
    await request(app).get('/?ok=1').expect(200);
    await request(app).get('/?ok=1').expect(429);
  });
});

describe('resetKey', () => {
  it('forgets the client key keyGenerator returns', async () => {
    const limiter = rateLimit({ limit: 1, keyGenerator: () => 'client-7' });
    const app = createServer(limiter);
    await request(app).get('/').expect(200);
    await request(app).get('/').expect(429);
    await limiter.resetKey('client-7');
    await request(app).get('/').expect(200);
  });

  it('forgets an IP key, under a limit function too', async () => {
    const limiter = rateLimit({ limit: async () => 1 });
    const app = createServer(limiter);
    await request(app).get('/').expect(200);
    const refused = await request(app).get('/').expect(429);
    expect(refused.get('x-ratelimit-limit')).toBe('1');
    await limiter.resetKey('::ffff:127.0.0.1');
    await request(app).get('/').expect(429);
    await limiter.resetKey('127.0.0.1');
    await request(app).get('/').expect(200);
  });
});

describe('refused hits are counted, as express-rate-limit counts them', () => {
  /** An app answering every request, refused or not, with its req.rateLimit.used and current. */
  function app(options: Parameters<typeof rateLimit>[0]) {
    const limiter = rateLimit({
      keyGenerator: () => 'client-1',
      handler: (req, res) =>
        res.status(429).json({ used: req.rateLimit!.used, current: req.rateLimit!.current }),
      ...options,
    });
    const a = express();
    a.use(limiter);
    a.get('/', (req, res) => res.json({ used: req.rateLimit!.used, current: req.rateLimit!.current }));
    a.get('/error', (req, res) => res.status(500).json({ used: req.rateLimit!.used }));
    return { a, limiter };
  }

  it('used and current keep rising past limit + 1; the next window starts from 1 again', async () => {
    vi.useFakeTimers({ now: 5_000_000 });
    try {
      const { a, limiter } = app({ limit: 2, windowMs: 60_000 });
      const seen: number[][] = [];
      for (let i = 0; i < 5; i++) {
        const r = await request(a).get('/');
        seen.push([r.status, r.body.used, r.body.current]);
      }
      expect(seen).toEqual([
        [200, 1, 1],
        [200, 2, 2],
        [429, 3, 3],
        [429, 4, 4],
        [429, 5, 5],
      ]);
      expect(await limiter.getKey('client-1'), 'getKey counts them too').toMatchObject({ totalHits: 5 });
      vi.advanceTimersByTime(61_000);
      const next = await request(a).get('/');
      expect([next.status, next.body.used], 'a new window').toEqual([200, 1]);
      expect(await limiter.getKey('client-1')).toMatchObject({ totalHits: 1 });
      await request(a).get('/');
      const refused = await request(a).get('/');
      expect([refused.status, refused.body.used], "the last window's refusals are not this one's").toEqual([
        429, 3,
      ]);
    } finally {
      vi.useRealTimers();
    }
  });

  it('with skipFailedRequests a refusal (a 429 is a failure) is given back, as upstream decrements it', async () => {
    const { a } = app({ limit: 1, skipFailedRequests: true });
    await request(a).get('/').expect(200);
    for (let i = 0; i < 3; i++) {
      const r = await request(a).get('/').expect(429);
      expect(r.body.used, `refusal ${i + 1}`).toBe(2);
      // The give-back happens once the response is done.
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  });
});

describe('a limit that is not a number fails at construction, naming the option', () => {
  // express-rate-limit takes `limit: 'zz'` and never limits (`totalHits > 'zz'` is false), sending
  // `X-RateLimit-Remaining: NaN`; tokenlease used to take it too and answer the first request 500.
  it.each([
    [{ limit: 'zz' }, 'limit'],
    [{ limit: '100' }, 'limit'],
    [{ limit: null }, 'limit'],
    [{ limit: -1 }, 'limit'],
    [{ max: 'zz' }, 'max'],
    [{ max: Number.NaN }, 'max'],
    [{ max: null }, 'max'],
  ])('%o', (options, field) => {
    let thrown: unknown;
    try {
      rateLimit(options as never);
    } catch (err) {
      thrown = err;
    }
    expect(thrown, 'thrown by rateLimit(options)').toBeInstanceOf(ConfigError);
    expect((thrown as ConfigError).field).toBe(field);
  });

  it('a limit function is still called per request (its result is checked then)', async () => {
    const app = createServer(rateLimit({ limit: () => 1, validate: false }));
    await request(app).get('/').expect(200);
    await request(app).get('/').expect(429);
  });
});

describe('limit: 0 refuses every request with the headers express-rate-limit sends', () => {
  // express-rate-limit counts the hit, then refuses it (totalHits > 0) with the usual headers of a
  // refusal: limit 0, remaining 0, the reset of the client's window (opened at its first hit) and
  // Retry-After.
  const now = 7_000_000;
  /** The app, and what each request saw in req.rateLimit. */
  function app(options: Parameters<typeof rateLimit>[0]) {
    const seen: Request['rateLimit'][] = [];
    const a = createServer(
      rateLimit({
        limit: 0,
        validate: { limit: false },
        keyGenerator: () => 'client-0',
        handler: (req, res, _next, o) => {
          seen.push(req.rateLimit);
          res.status(o.statusCode).send('no');
        },
        ...options,
      }),
    );
    return { a, seen };
  }

  it('legacy headers by default: X-RateLimit-Limit 0, Remaining 0, Reset, and Retry-After', async () => {
    vi.useFakeTimers({ now });
    try {
      const { a, seen } = app({ windowMs: 60_000 });
      await request(a)
        .get('/')
        .expect(429)
        .expect('x-ratelimit-limit', '0')
        .expect('x-ratelimit-remaining', '0')
        .expect('x-ratelimit-reset', String(Math.ceil((now + 60_000) / 1000)))
        .expect('retry-after', '60');
      vi.advanceTimersByTime(10_000);
      await request(a).get('/').expect(429).expect('retry-after', '50');
      expect(seen.map((i) => [i?.limit, i?.used, i?.remaining, i?.key, i?.resetTime?.getTime()])).toEqual([
        [0, 1, 0, 'client-0', now + 60_000],
        [0, 2, 0, 'client-0', now + 60_000],
      ]);
      expect(seen[1]?.current, 'current, as upstream').toBe(2);
    } finally {
      vi.useRealTimers();
    }
  });

  it.each([
    [
      'draft-6',
      {
        'ratelimit-policy': '0;w=60',
        'ratelimit-limit': '0',
        'ratelimit-remaining': '0',
        'ratelimit-reset': '60',
      },
    ],
    ['draft-7', { 'ratelimit-policy': '0;w=60', ratelimit: 'limit=0, remaining=0, reset=60' }],
    ['draft-8', { ratelimit: '"0-in-1min"; r=0; t=60' }],
  ] as const)('standardHeaders %s', async (standardHeaders, expected) => {
    vi.useFakeTimers({ now });
    try {
      const { a } = app({ standardHeaders, legacyHeaders: false });
      const r = await request(a).get('/').expect(429).expect('retry-after', '60');
      expect(r.headers).toMatchObject(expected);
      expect(r.headers['x-ratelimit-limit']).toBeUndefined();
      if (standardHeaders === 'draft-8') {
        expect(r.headers['ratelimit-policy']).toMatch(/^"0-in-1min"; q=0; w=60; pk=:[A-Za-z0-9+/=]+:$/);
      }
    } finally {
      vi.useRealTimers();
    }
  });

  it('no rate-limit headers, and no Retry-After, with both kinds off', async () => {
    const { a } = app({ standardHeaders: false, legacyHeaders: false });
    const r = await request(a).get('/').expect(429);
    expect(Object.keys(r.headers).filter((h) => /ratelimit|retry-after/.test(h))).toEqual([]);
  });

  it('with skipFailedRequests each refusal (a 429) is given back, as upstream decrements it', async () => {
    const { a, seen } = app({ skipFailedRequests: true });
    for (let i = 0; i < 3; i++) {
      await request(a).get('/').expect(429);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(seen.map((i) => i?.used)).toEqual([1, 1, 1]);
  });

  it('the refusals are counted in the client window, which getKey reads and resetKey forgets', async () => {
    const limiter = rateLimit({ limit: 0, validate: { limit: false }, keyGenerator: () => 'client-0' });
    const a = createServer(limiter);
    await request(a).get('/').expect(429);
    await request(a).get('/').expect(429);
    expect(await limiter.getKey('client-0')).toMatchObject({ totalHits: 2 });
    await limiter.resetKey('client-0');
    expect(await limiter.getKey('client-0')).toBeUndefined();
  });
});

describe('getKey', () => {
  it('reads the hits and the window end of a client key, counting nothing', async () => {
    vi.useFakeTimers({ now: 1_000_000 });
    try {
      const limiter = rateLimit({ limit: 2, windowMs: 60_000, keyGenerator: () => 'client-9' });
      const app = createServer(limiter);
      expect(await limiter.getKey('client-9'), 'an unseen key, as express-rate-limit').toBeUndefined();
      await request(app).get('/').expect(200);
      vi.advanceTimersByTime(1000);
      expect(await limiter.getKey('client-9')).toEqual({ totalHits: 1, resetTime: new Date(1_060_000) });
      expect(await limiter.getKey('client-9'), 'reading again counts nothing').toMatchObject({
        totalHits: 1,
      });
      await request(app).get('/').expect(200);
      expect(await limiter.getKey('client-9')).toMatchObject({ totalHits: 2 });
      await request(app).get('/').expect(429);
      await limiter.resetKey('client-9');
      expect(await limiter.getKey('client-9')).toBeUndefined();
    } finally {
      vi.useRealTimers();
    }
  });
});

describe('validation warnings (express-rate-limit codes)', () => {
  it('names an unknown option and the one it probably means', () => {
    const l = logger();
    // @ts-expect-error a misspelt option
    rateLimit({ windowMS: 1000, logger: l });
    expect(codes(l)).toEqual(['ERR_ERL_UNKNOWN_OPTION']);
    expect(String(l.error.mock.calls[0]![0])).toContain('`windowMs`');
  });

  it('X-Forwarded-For without a trusted proxy, once', async () => {
    const l = logger();
    const app = createServer(rateLimit({ logger: l }));
    await request(app).get('/').set('X-Forwarded-For', '203.0.113.1').expect(200);
    await request(app).get('/').set('X-Forwarded-For', '203.0.113.1').expect(200);
    expect(codes(l)).toEqual(['ERR_ERL_UNEXPECTED_X_FORWARDED_FOR']);
  });

  it('the proxy checks look at the first request only, as express-rate-limit’s do', async () => {
    const l = logger();
    const app = createServer(rateLimit({ logger: l }));
    await request(app).get('/').expect(200);
    await request(app).get('/').set('X-Forwarded-For', '203.0.113.1').expect(200);
    expect(codes(l), 'a later request is not checked').toEqual([]);
  });

  it("'trust proxy' true", async () => {
    const l = logger();
    const app = createServer(rateLimit({ logger: l }));
    app.set('trust proxy', true);
    await request(app).get('/').expect(200);
    expect(codes(l)).toEqual(['ERR_ERL_PERMISSIVE_TRUST_PROXY']);
  });

  it('a limiter created inside a request handler', async () => {
    const l = logger();
    const app = express();
    app.get('/', (_req, res) => {
      rateLimit({ logger: l });
      res.send('ok');
    });
    await request(app).get('/').expect(200);
    expect(codes(l)).toEqual(['ERR_ERL_CREATED_IN_REQUEST_HANDLER']);
    const quiet = logger();
    rateLimit({ logger: quiet });
    expect(codes(quiet), 'created at start-up').toEqual([]);
  });

  it('validate: false and validate: { name: false } turn checks off', async () => {
    const off = logger();
    // @ts-expect-error a misspelt option
    rateLimit({ windowMS: 1000, logger: off, validate: false });
    const one = logger();
    const app = createServer(rateLimit({ logger: one, validate: { xForwardedForHeader: false } }));
    await request(app).get('/').set('X-Forwarded-For', '203.0.113.1').expect(200);
    expect([...codes(off), ...codes(one)]).toEqual([]);
  });
});

describe("Express's trust proxy", () => {
  it('counts clients behind a trusted proxy apart, and ignores the header otherwise', async () => {
    const trusted = createServer(rateLimit({ limit: 1, validate: false }));
    trusted.set('trust proxy', 'loopback');
    await request(trusted).get('/').set('X-Forwarded-For', '203.0.113.1').expect(200);
    await request(trusted).get('/').set('X-Forwarded-For', '203.0.113.2').expect(200);
    await request(trusted).get('/').set('X-Forwarded-For', '203.0.113.1').expect(429);

    const untrusted = createServer(rateLimit({ limit: 1, validate: false }));
    await request(untrusted).get('/').set('X-Forwarded-For', '203.0.113.1').expect(200);
    await request(untrusted).get('/').set('X-Forwarded-For', '203.0.113.2').expect(429);
  });

  it('with a limiter: its own trustProxy wins over the app setting', async () => {
    const limiter = new Limiter({
      policies: { p: { algorithm: 'fixed-window', limit: 1, window: '1m' } },
      sweepIntervalMs: 0,
    });
    const app = createServer(rateLimit({ limiter, rules: [{ policy: 'p', by: 'ip' }], trustProxy: false }));
    app.set('trust proxy', true);
    await request(app).get('/').set('X-Forwarded-For', '203.0.113.1').expect(200);
    await request(app).get('/').set('X-Forwarded-For', '203.0.113.2').expect(429);
    await limiter.close();
  });
});

describe('with a limiter (tokenlease options) and the peer callback shapes', () => {
  const limiterOf = () =>
    new Limiter({
      store: new MemoryStore(),
      policies: {
        fast: { algorithm: 'fixed-window', limit: 1, window: '5s', anchor: 'first-hit', lease: 'exact' },
        slow: { algorithm: 'fixed-window', limit: 5, window: '1m', anchor: 'first-hit', lease: 'exact' },
      },
      sweepIntervalMs: 0,
    });

  it('stacked draft-8 middlewares append to RateLimit and RateLimit-Policy; pk hashes the client key', async () => {
    const limiter = limiterOf();
    const pk = Buffer.from(createHash('sha256').update('foo').digest('hex').slice(0, 12)).toString('base64');
    const options = { limiter, standardHeaders: 'draft-8' as const, keyGenerator: () => 'foo' };
    const app = createServer([
      rateLimit({ ...options, rules: [{ policy: 'fast', name: '1-in-5sec' }] }),
      rateLimit({ ...options, rules: [{ policy: 'slow', name: '5-in-1min' }] }),
    ]);
    await request(app)
      .get('/')
      .expect('ratelimit-policy', `"1-in-5sec"; q=1; w=5; pk=:${pk}:, "5-in-1min"; q=5; w=60; pk=:${pk}:`)
      .expect('ratelimit', '"1-in-5sec"; r=0; t=5, "5-in-1min"; r=4; t=60')
      .expect(200);
    await limiter.close();
  });

  it('standardHeaders: true is draft-6; handler gets (req, res, next, options); req.rateLimit has current', async () => {
    const limiter = limiterOf();
    let seen: Request['rateLimit'];
    const app = createServer(
      rateLimit({
        limiter,
        rules: [{ policy: 'fast' }],
        standardHeaders: true,
        statusCode: 420,
        keyGenerator: (_req, res) => (res.locals ? 7 : 8),
        handler: (req, res, _next, options) => {
          seen = req.rateLimit;
          res.status(options.statusCode).send(`slow down ${options.info?.key}`);
        },
      }),
    );
    await request(app).get('/').expect('ratelimit-limit', '1').expect('ratelimit-remaining', '0').expect(200);
    await request(app).get('/').expect(420, 'slow down 7');
    expect(seen).toMatchObject({ limit: 1, used: 2, remaining: 0, key: '7' });
    expect(seen?.current).toBe(2);
    await limiter.close();
  });

  it('a string message is the body; an async message is awaited', async () => {
    const limiter = limiterOf();
    const text = createServer(
      rateLimit({ limiter, rules: [{ policy: 'fast' }], message: 'Enhance your calm' }),
    );
    await request(text).get('/').expect(200);
    await request(text).get('/').expect(429, 'Enhance your calm');
    await limiter.close();
    const other = limiterOf();
    const fn = createServer(
      rateLimit({ limiter: other, rules: [{ policy: 'fast' }], message: async () => ({ no: 1 }) }),
    );
    await request(fn).get('/').expect(200);
    await request(fn).get('/').expect(429, { no: 1 });
    await other.close();
  });
});

describe('a shared RedisStore', () => {
  it('two app instances on one Redis share each client’s window', async () => {
    const client = redisClient();
    const prefix = uniquePrefix('erl');
    // A generous timeout: a busy CI box must not turn this into a fail-policy decision.
    const stores = [0, 1].map(() => new RedisStore({ client, prefix, timeoutMs: 2000 }));
    await Promise.all(stores.map((s) => s.ready()));
    const a = createServer(rateLimit({ limit: 2, store: stores[0] }));
    const b = createServer(rateLimit({ limit: 2, store: stores[1] }));
    await request(a).get('/').expect('x-ratelimit-remaining', '1').expect(200);
    await request(b).get('/').expect('x-ratelimit-remaining', '0').expect(200);
    const refused = await request(a).get('/').expect(429, 'Too many requests, please try again later.');
    expect(Number(refused.get('retry-after'))).toBe(60);
  });
});
