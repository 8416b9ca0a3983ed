import { once } from 'node:events';
import http, { type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect } from 'node:net';
import express from 'express';
import Fastify, { type FastifyRequest } from 'fastify';
import { type ExpressRateLimitOptions, rateLimit as expressRateLimit } from '../../src/http/express.js';
import { type FastifyRateLimitOptions, rateLimitPlugin } from '../../src/http/fastify.js';
import { rateLimit as nodeRateLimit, type RateLimitInfo } from '../../src/http/index.js';
import { Limiter, MemoryStore, type PolicyConfig, type TokenBucketPolicy } from '../../src/index.js';

export type AdapterName = 'node' | 'express' | 'fastify';
export const ADAPTERS: readonly AdapterName[] = ['node', 'express', 'fastify'];

/** Options all three adapters accept (the shared core options). */
export type CommonOptions = Omit<
  ExpressRateLimitOptions,
  'handler' | 'onExceeded' | 'onExceeding' | 'onShadowExceeded'
> & {
  onExceeded?: (info: RateLimitInfo) => void;
  onShadowExceeded?: (info: RateLimitInfo) => void;
};

export interface Running {
  url: string;
  port: number;
  close(): Promise<void>;
}

/** A virtual clock shared by the limiter, its MemoryStore and the middleware. */
export function virtualClock(start = 1_700_000_000_000) {
  let t = start;
  return {
    now: () => t,
    advance(ms: number) {
      t += ms;
    },
  };
}

export function tokenBucket(
  rate: number,
  period: TokenBucketPolicy['period'] = '1s',
  burst = rate,
): PolicyConfig {
  return { algorithm: 'token-bucket', rate, period, burst };
}

/** A limiter on a MemoryStore with the clock injected and no background timer. */
export function memoryLimiter(policies: Record<string, PolicyConfig>, now: () => number): Limiter {
  return new Limiter({ store: new MemoryStore({ now }), policies, now, sweepIntervalMs: 0 });
}

/** What every test server answers on an admitted request: what the middleware decided. */
function summary(info: RateLimitInfo | undefined, path: string) {
  return {
    path,
    rateLimit: info ? { key: info.key, plan: info.plan, shadowExceeded: info.shadowExceeded } : null,
  };
}

/**
 * Starts a real HTTP server on 127.0.0.1 with the adapter under test in front of a few routes:
 * `GET /profile`, `POST /reports`, `GET /public/info`, `GET /users/:id`.
 */
export async function startServer(
  adapter: AdapterName,
  options: CommonOptions,
  extra: { fastifyRoutes?: (app: ReturnType<typeof Fastify>) => void } = {},
): Promise<Running> {
  const { onExceeded, onShadowExceeded, ...rest } = options;
  const hooks = {
    ...(onExceeded && {
      onExceeded: (_req: unknown, ...args: unknown[]) => onExceeded(args.at(-1) as RateLimitInfo),
    }),
    ...(onShadowExceeded && {
      onShadowExceeded: (_req: unknown, ...args: unknown[]) => onShadowExceeded(args.at(-1) as RateLimitInfo),
    }),
  };
  if (adapter === 'fastify') {
    const app = Fastify();
    await app.register(rateLimitPlugin, { ...rest, ...hooks } as FastifyRateLimitOptions);
    for (const path of ['/profile', '/public/info', '/users/:id']) {
      app.get(path, async (req: FastifyRequest) => summary(req.rateLimit, req.url));
    }
    app.post('/reports', async (req: FastifyRequest) => summary(req.rateLimit, req.url));
    extra.fastifyRoutes?.(app);
    await app.listen({ port: 0, host: '127.0.0.1' });
    const port = (app.server.address() as { port: number }).port;
    return { url: `http://127.0.0.1:${port}`, port, close: () => app.close() };
  }
  let server: Server;
  if (adapter === 'express') {
    const app = express();
    app.use(expressRateLimit({ ...rest, ...hooks } as ExpressRateLimitOptions));
    for (const path of ['/profile', '/public/info', '/users/:id']) {
      app.get(path, (req, res) => {
        res.json(summary(req.rateLimit, req.originalUrl));
      });
    }
    app.post('/reports', (req, res) => {
      res.json(summary(req.rateLimit, req.originalUrl));
    });
    server = http.createServer(app);
  } else {
    const limit = nodeRateLimit({ ...rest, ...hooks } as Parameters<typeof nodeRateLimit>[0]);
    server = http.createServer(async (req: IncomingMessage, res: ServerResponse) => {
      if (!(await limit(req, res))) return;
      const info = (req as unknown as { rateLimit?: RateLimitInfo }).rateLimit;
      res.setHeader('Content-Type', 'application/json');
      res.end(JSON.stringify(summary(info, req.url ?? '/')));
    });
  }
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/**
 * Sends bytes exactly as given over a raw TCP socket (for requests fetch refuses to send: huge or
 * non-UTF-8 headers) and parses the response.
 */
export async function rawRequest(port: number, request: Buffer): Promise<RawResponse> {
  const socket = connect(port, '127.0.0.1');
  const chunks: Buffer[] = [];
  socket.on('data', (c: Buffer) => chunks.push(c));
  await once(socket, 'connect');
  socket.end(request);
  await once(socket, 'close');
  const text = Buffer.concat(chunks).toString('latin1');
  const [head = '', ...rest] = text.split('\r\n\r\n');
  const [statusLine = '', ...lines] = head.split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const i = line.indexOf(':');
    headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
  }
  return { status: Number(statusLine.split(' ')[1]), headers, body: rest.join('\r\n\r\n') };
}

/** `"per-key";r=4;t=1, "daily";r=9;t=3` -> [{ name, r, t }]. */
export function parseRateLimit(header: string | null): { name: string; r: number; t: number | undefined }[] {
  if (!header) return [];
  return header.split(/,\s*/).map((item) => {
    const [name = '', ...params] = item.split(';');
    const p = Object.fromEntries(params.map((kv) => kv.trim().split('=') as [string, string]));
    return {
      name: JSON.parse(name.trim()) as string,
      r: Number(p.r),
      t: p.t === undefined ? undefined : Number(p.t),
    };
  });
}
