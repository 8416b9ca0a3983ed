/**
 * The apps of issue 16's adapter benches, one per (framework, variant), shared by the socket bench
 * (bench/adapter-server.ts, one process each) and the in-process one (bench/adapter-cpu.ts), so
 * both measure the same code. Framework node | express | fastify; variant:
 * - `none`: the framework answering 200, no limiter;
 * - `map`: the same calling a bare Map token bucket directly (the floor for any limiter);
 * - `map-headers`: the same, also sending the adapter's default `RateLimit-Policy` and `RateLimit`
 *   headers from the bucket's state: the same response bytes and header work as `adapter`, so the
 *   two differ by the limiter alone;
 * - `consume`: the same awaiting `limiter.consume` directly (tokenlease without its adapter);
 * - `adapter`: tokenlease's `rateLimit` adapter for that framework, one rule.
 * One hot client, a limit never reached, a MemoryStore: what is measured is the CPU each layer adds
 * per request. The client is keyed as each framework's users key it, and as the adapter does:
 * Express's `req.ip` and Fastify's `request.ip` (they honour the framework's trust-proxy setting),
 * the socket's address for node:http.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import express from 'express';
import Fastify from 'fastify';
import type * as Express from '../src/http/express.js';
import type * as Fastifies from '../src/http/fastify.js';
import type * as Http from '../src/http/index.js';
import { contestant, MapBuckets, OPEN, type Verdict } from './contestants.js';
import { entryPoint, Limiter, MemoryStore } from './tokenlease.js';

export const FRAMEWORKS = ['node', 'express', 'fastify'] as const;
export type Framework = (typeof FRAMEWORKS)[number];
export const VARIANTS = ['none', 'map', 'map-headers', 'consume', 'adapter'] as const;
export type Variant = (typeof VARIANTS)[number];

export interface AdapterApp {
  /** The request listener, for calling in process. */
  readonly listener: (req: IncomingMessage, res: ServerResponse) => void;
  /** The server to listen with (Fastify's own, from its `serverFactory`). */
  readonly server: Server;
  close(): Promise<void>;
}

export interface AppOptions {
  /** Called once an admitted request's 200 is sent (in process, to know a request is done). */
  readonly answered?: () => void;
}

/** What the adapter sends by default (draft-10) for this policy. */
const POLICY_HEADER = `"per-client";q=${OPEN.burst};w=${OPEN.burst / (OPEN.rate / OPEN.periodS)}`;

/** The Map bucket sending the adapter's headers: `map-headers`. */
class MapWithHeaders {
  readonly #buckets = new MapBuckets(OPEN);

  /**
   * The bucket deciding `key`: the value of the `RateLimit` header the adapter would send with
   * `POLICY_HEADER`, or undefined when refused (never, at this limit).
   */
  rateLimit(key: string): string | undefined {
    const b = this.#buckets.level(key, Date.now());
    if (b.tokens < 1) return undefined;
    b.tokens -= 1;
    const reset = Math.ceil((OPEN.burst - b.tokens) / (OPEN.rate / OPEN.periodS));
    return `"per-client";r=${Math.floor(b.tokens)};t=${reset}`;
  }

  /** For a plain response (node:http, Express): true when the request may go on. */
  decide(key: string, res: ServerResponse): boolean {
    const rateLimit = this.rateLimit(key);
    if (rateLimit === undefined) return false;
    res.setHeader('RateLimit-Policy', POLICY_HEADER);
    res.setHeader('RateLimit', rateLimit);
    return true;
  }
}

const rules = [{ policy: 'per-client', by: 'ip' as const }];

function newLimiter(): Limiter {
  return new Limiter({
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
}

function refuse(res: ServerResponse): void {
  res.statusCode = 429;
  res.end();
}

/** The app of `framework` with `variant` in front of its one route. */
export async function adapterApp(
  framework: Framework,
  variant: Variant,
  options: AppOptions = {},
): Promise<AdapterApp> {
  const limiter = newLimiter();
  const map = await contestant('map').create('hit', { redisUrl: '', prefix: '' });
  const withHeaders = new MapWithHeaders();
  const parts = { limiter, map, withHeaders, variant, answered: options.answered };
  const built = await BUILDERS[framework](parts);
  return { ...built, close: () => limiter.close() };
}

interface Parts {
  readonly limiter: Limiter;
  readonly map: { decide(key: string): Verdict | Promise<Verdict> };
  readonly withHeaders: MapWithHeaders;
  readonly variant: Variant;
  readonly answered: (() => void) | undefined;
}

type Built = Omit<AdapterApp, 'close'>;

const BUILDERS: Record<Framework, (parts: Parts) => Promise<Built>> = {
  node: nodeApp,
  express: expressApp,
  fastify: fastifyApp,
};

/** The variant's check for a plain (req, res) server: true (or resolves true) when the request may go on. */
async function nodeCheck(
  p: Parts,
): Promise<(req: IncomingMessage, res: ServerResponse) => boolean | Promise<boolean>> {
  const ip = (req: IncomingMessage) => req.socket.remoteAddress ?? '';
  switch (p.variant) {
    case 'none':
      return () => true;
    case 'map':
      return (req) => (p.map.decide(ip(req)) as Verdict).allowed;
    case 'map-headers':
      return (req, res) => p.withHeaders.decide(ip(req), res);
    case 'consume':
      return async (req) => (await p.limiter.consume('per-client', ip(req))).allowed;
    case 'adapter':
      return (await entryPoint<typeof Http>('http')).rateLimit({ limiter: p.limiter, rules });
  }
}

async function nodeApp(p: Parts): Promise<Built> {
  const check = await nodeCheck(p);
  const { answered } = p;
  const ok = (res: ServerResponse) => {
    res.setHeader('content-type', 'text/plain');
    res.end('ok');
    answered?.();
  };
  const listener = (req: IncomingMessage, res: ServerResponse) => {
    const pass = check(req, res);
    if (pass === true) ok(res);
    else if (pass === false) refuse(res);
    else pass.then((p) => (p ? ok(res) : res.writableEnded || refuse(res)));
  };
  return { listener, server: createServer(listener) };
}

async function expressApp(p: Parts): Promise<Built> {
  const { map, withHeaders, limiter, answered } = p;
  const app = express();
  app.disable('x-powered-by');
  app.disable('etag');
  const ip = (req: express.Request) => req.ip ?? '';
  if (p.variant === 'map') {
    app.use((req, res, next) => ((map.decide(ip(req)) as Verdict).allowed ? next() : refuse(res)));
  } else if (p.variant === 'map-headers') {
    app.use((req, res, next) => (withHeaders.decide(ip(req), res) ? next() : refuse(res)));
  } else if (p.variant === 'consume') {
    app.use(async (req, res, next) =>
      (await limiter.consume('per-client', ip(req))).allowed ? next() : refuse(res),
    );
  } else if (p.variant === 'adapter') {
    app.use((await entryPoint<typeof Express>('express')).rateLimit({ limiter, rules }));
  }
  app.get('/', (_req, res) => {
    res.type('text/plain').send('ok');
    answered?.();
  });
  return { listener: app, server: createServer(app) };
}

async function fastifyApp(p: Parts): Promise<Built> {
  const { map, withHeaders, limiter, answered } = p;
  let built: Built | undefined;
  const app = Fastify({
    serverFactory: (handler) => {
      const server = createServer(handler);
      built = { listener: handler, server };
      return server;
    },
  });
  const ip = (req: { ip: string }) => req.ip;
  if (p.variant === 'map') {
    app.addHook('onRequest', (req, reply, done) => {
      if ((map.decide(ip(req)) as Verdict).allowed) done();
      else reply.code(429).send();
    });
  } else if (p.variant === 'map-headers') {
    app.addHook('onRequest', (req, reply, done) => {
      const rateLimit = withHeaders.rateLimit(ip(req));
      if (rateLimit === undefined) reply.code(429).send();
      else {
        reply.header('RateLimit-Policy', POLICY_HEADER).header('RateLimit', rateLimit);
        done();
      }
    });
  } else if (p.variant === 'consume') {
    app.addHook('onRequest', async (req, reply) => {
      if (!(await limiter.consume('per-client', ip(req))).allowed) return reply.code(429).send();
    });
  } else if (p.variant === 'adapter') {
    await app.register((await entryPoint<typeof Fastifies>('fastify')).rateLimitPlugin, { limiter, rules });
  }
  app.get('/', async (_req, reply) => {
    const sent = reply.type('text/plain').send('ok');
    answered?.();
    return sent;
  });
  await app.ready();
  return built as Built;
}
