/**
 * The adapter bench's server, one process per (framework, variant):
 * `tsx bench/adapter-server.ts <framework> <variant>`, framework node | express | fastify, variant:
 * - `none`: the framework answering 200, no limiter;
 * - `map`: the same calling a bare Map token bucket directly (the floor for any limiter);
 * - `map-headers`: the same, also sending the adapter's default `RateLimit-Policy` and `RateLimit`
 *   headers from the bucket's state: the same response bytes and header work as `adapter`, so the
 *   two differ by the limiter alone;
 * - `consume`: the same awaiting `limiter.consume` directly (tokenlease without its adapter);
 * - `adapter`: tokenlease's `rateLimit` adapter for that framework, one rule.
 * One hot client (every request from 127.0.0.1), a limit never reached, a MemoryStore: what is
 * measured is the CPU each layer adds per request. The client is keyed as each framework's
 * users key it, and as the adapter does: Express's `req.ip` and Fastify's `request.ip` (they honour
 * the framework's trust-proxy setting), the socket's address for node:http. Same IPC protocol as
 * http-server.ts.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import express from 'express';
import Fastify from 'fastify';
import type * as Express from '../src/http/express.js';
import type * as Fastifies from '../src/http/fastify.js';
import type * as Http from '../src/http/index.js';
import { contestant, MapBuckets, OPEN, type Verdict } from './contestants.js';
import { serveOverIpc } from './server-ipc.js';
import { entryPoint, Limiter, MemoryStore } from './tokenlease.js';

type Framework = 'node' | 'express' | 'fastify';
type Variant = 'none' | 'map' | 'map-headers' | 'consume' | 'adapter';
const [framework = 'node', variant = 'none'] = process.argv.slice(2) as [Framework, Variant];

const limiter = new Limiter({
  store: new MemoryStore(),
  policies: {
    'per-client': {
      algorithm: 'token-bucket',
      rate: OPEN.rate,
      period: OPEN.periodS * 1000,
      burst: OPEN.burst,
    },
  },
});
const rules = [{ policy: 'per-client', by: 'ip' as const }];
const map = await contestant('map').create('hit', { redisUrl: '', prefix: '' });

const buckets = new MapBuckets(OPEN);
/** What the adapter sends by default (draft-10) for this policy. */
const POLICY_HEADER = `"per-client";q=${OPEN.burst};w=${OPEN.burst / (OPEN.rate / OPEN.periodS)}`;

/**
 * The Map bucket deciding `key`: the value of the `RateLimit` header the adapter would send with
 * `POLICY_HEADER`, or undefined when refused (never, at this limit).
 */
function mapRateLimit(key: string): string | undefined {
  const b = buckets.level(key, Date.now());
  if (b.tokens < 1) return undefined;
  b.tokens -= 1;
  const reset = Math.ceil((OPEN.burst - b.tokens) / (OPEN.rate / OPEN.periodS));
  return `"per-client";r=${Math.floor(b.tokens)};t=${reset}`;
}

/** `map-headers` for a plain response (node:http, Express): true when the request may go on. */
function mapWithHeaders(key: string, res: ServerResponse): boolean {
  const rateLimit = mapRateLimit(key);
  if (rateLimit === undefined) return false;
  res.setHeader('RateLimit-Policy', POLICY_HEADER);
  res.setHeader('RateLimit', rateLimit);
  return true;
}

/** The variant's check for a plain (req, res) server: resolves true when the request may go on. */
async function nodeCheck(): Promise<
  (req: IncomingMessage, res: ServerResponse) => boolean | Promise<boolean>
> {
  const ip = (req: IncomingMessage) => req.socket.remoteAddress ?? '';
  switch (variant) {
    case 'none':
      return () => true;
    case 'map':
      return (req) => (map.decide(ip(req)) as Verdict).allowed;
    case 'map-headers':
      return (req, res) => mapWithHeaders(ip(req), res);
    case 'consume':
      return async (req) => (await limiter.consume('per-client', ip(req))).allowed;
    case 'adapter':
      return (await entryPoint<typeof Http>('http')).rateLimit({ limiter, rules });
  }
}

function refuse(res: ServerResponse): void {
  res.statusCode = 429;
  res.end();
}

async function nodeServer(): Promise<ReturnType<typeof createServer>> {
  const check = await nodeCheck();
  const ok = (res: ServerResponse) => {
    res.setHeader('content-type', 'text/plain');
    res.end('ok');
  };
  return createServer((req, res) => {
    const pass = check(req, res);
    if (pass === true) ok(res);
    else if (pass === false) refuse(res);
    else pass.then((p) => (p ? ok(res) : res.writableEnded || refuse(res)));
  });
}

async function expressServer(): Promise<ReturnType<typeof createServer>> {
  const app = express();
  app.disable('x-powered-by');
  app.disable('etag');
  const ip = (req: express.Request) => req.ip ?? '';
  if (variant === 'map') {
    app.use((req, res, next) => ((map.decide(ip(req)) as Verdict).allowed ? next() : refuse(res)));
  } else if (variant === 'map-headers') {
    app.use((req, res, next) => (mapWithHeaders(ip(req), res) ? next() : refuse(res)));
  } else if (variant === 'consume') {
    app.use(async (req, res, next) =>
      (await limiter.consume('per-client', ip(req))).allowed ? next() : refuse(res),
    );
  } else if (variant === 'adapter') {
    app.use((await entryPoint<typeof Express>('express')).rateLimit({ limiter, rules }));
  }
  app.get('/', (_req, res) => {
    res.type('text/plain').send('ok');
  });
  return createServer(app);
}

async function fastifyServer(): Promise<ReturnType<typeof createServer>> {
  let server: ReturnType<typeof createServer> | undefined;
  const app = Fastify({
    serverFactory: (handler) => {
      server = createServer(handler);
      return server;
    },
  });
  const ip = (req: { ip: string }) => req.ip;
  if (variant === 'map') {
    app.addHook('onRequest', (req, reply, done) => {
      if ((map.decide(ip(req)) as Verdict).allowed) done();
      else reply.code(429).send();
    });
  } else if (variant === 'map-headers') {
    app.addHook('onRequest', (req, reply, done) => {
      const rateLimit = mapRateLimit(ip(req));
      if (rateLimit === undefined) reply.code(429).send();
      else {
        reply.header('RateLimit-Policy', POLICY_HEADER).header('RateLimit', rateLimit);
        done();
      }
    });
  } else if (variant === 'consume') {
    app.addHook('onRequest', async (req, reply) => {
      if (!(await limiter.consume('per-client', ip(req))).allowed) return reply.code(429).send();
    });
  } else if (variant === 'adapter') {
    await app.register((await entryPoint<typeof Fastifies>('fastify')).rateLimitPlugin, { limiter, rules });
  }
  app.get('/', async (_req, reply) => reply.type('text/plain').send('ok'));
  await app.ready();
  return server as ReturnType<typeof createServer>;
}

const servers: Record<Framework, () => Promise<ReturnType<typeof createServer>>> = {
  node: nodeServer,
  express: expressServer,
  fastify: fastifyServer,
};
if (!(framework in servers)) throw new Error(`unknown framework ${framework}`);
const server = await servers[framework]();

serveOverIpc(
  server,
  () => ({ refused: 0, errors: 0 }),
  () => limiter.close(),
);
