import { IncomingMessage, type Server } from 'node:http';
import { Socket } from 'node:net';
import express from 'express';
import { afterAll, describe, expect, it } from 'vitest';
import { rateLimit } from '../../src/http/express.js';
import { Limiter } from '../../src/index.js';

// Refilled a token every 36 s: `current` (the tokens taken) cannot be refilled away while a loaded
// machine serves the request (at 100/s, 10 ms did: current 0).
const limiter = new Limiter({
  policies: { 'per-client': { algorithm: 'token-bucket', rate: 100, period: '1h' } },
  sweepIntervalMs: 0,
});
afterAll(() => limiter.close());

async function get(app: express.Express, path: string): Promise<unknown> {
  const server: Server = await new Promise((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  try {
    const { port } = server.address() as { port: number };
    return await (await fetch(`http://127.0.0.1:${port}${path}`)).json();
  } finally {
    server.close();
  }
}

/** Runs the middleware on `req` with a response that only takes headers, up to `next()`. */
function runOnce(middleware: express.RequestHandler, req: express.Request): Promise<void> {
  const res = {
    headersSent: false,
    getHeader: () => undefined,
    setHeader: () => {},
  } as unknown as express.Response;
  return new Promise<void>((resolve, reject) => {
    middleware(req, res, (err?: unknown) => (err ? reject(err) : resolve()));
  });
}

describe('Express: req[requestPropertyName] (kept off the request object itself)', () => {
  it('reads like an own property in the app, in a mounted sub-app and after leaving it', async () => {
    const app = express();
    const sub = express();
    const seen: Record<string, unknown> = {};
    sub.use(rateLimit({ limiter, rules: [{ policy: 'per-client' }] }));
    sub.use((req, _res, next) => {
      seen.inSub = req.rateLimit?.limit;
      next('router');
    });
    app.use('/api', sub);
    app.use((req, res) => {
      res.json({ inSub: seen.inSub, after: req.rateLimit?.limit, current: req.rateLimit?.current });
    });
    expect(await get(app, '/api/x')).toEqual({ inSub: 100, after: 100, current: 1 });
  });

  it('keeps each request its own value, and an assignment by the app wins', async () => {
    const app = express();
    app.use(rateLimit({ limiter, rules: [{ policy: 'per-client' }], requestPropertyName: 'limits' }));
    app.get('/mine', (req, res) => {
      const r = req as unknown as { limits: unknown };
      const before = (r.limits as { remaining: number }).remaining;
      r.limits = 'replaced';
      res.json({ before, after: r.limits });
    });
    app.get('/other', (req, res) => {
      res.json({ limits: typeof (req as unknown as { limits: unknown }).limits });
    });
    const first = (await get(app, '/mine')) as { before: number; after: unknown };
    expect(first.after).toBe('replaced');
    // A later request gets a fresh decision, not the string the earlier one was given.
    expect(await get(app, '/other')).toEqual({ limits: 'object' });
  });

  it('keeps the value out of what res.locals shows: keys, JSON and copies', async () => {
    const app = express();
    app.use(rateLimit({ limiter, rules: [{ policy: 'per-client' }] }));
    app.get('/', (req, res) => {
      res.locals.user = 'u1';
      res.json({
        limit: req.rateLimit?.limit,
        keys: Object.keys(res.locals),
        json: JSON.stringify(res.locals),
        copied: Reflect.ownKeys({ ...res.locals }),
      });
    });
    expect(await get(app, '/')).toEqual({
      limit: 100,
      keys: ['user'],
      json: '{"user":"u1"}',
      copied: ['user'],
    });
  });

  it('an Express request without res.locals still reads its value back', async () => {
    const app = express();
    const middleware = rateLimit({ limiter, rules: [{ policy: 'per-client' }] });
    const req = new IncomingMessage(new Socket());
    req.method = 'GET';
    req.url = '/';
    Object.setPrototypeOf(req, app.request);
    await runOnce(middleware, req as express.Request);
    expect(Object.hasOwn(req, 'rateLimit'), 'no own property').toBe(false);
    expect((req as express.Request).rateLimit?.limit).toBe(100);
  });

  it('a request whose prototype chain is not Express’s gets an own property', async () => {
    const middleware = rateLimit({ limiter, rules: [{ policy: 'per-client' }] });
    const req = {
      method: 'GET',
      url: '/',
      headers: {},
      socket: { remoteAddress: '127.0.0.1' },
      ip: '127.0.0.1',
    } as unknown as express.Request;
    await runOnce(middleware, req);
    expect(Object.hasOwn(req, 'rateLimit'), 'own property').toBe(true);
    expect(req.rateLimit?.limit).toBe(100);
  });
});
