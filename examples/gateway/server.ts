// A small reverse proxy in front of an upstream, rate limited by the plans in plans.yaml.
//   npm run example:gateway       (gateway on 127.0.0.1:8080, demo upstream on 127.0.0.1:8081)
// Environment: PORT, UPSTREAM (an existing upstream URL instead of the demo one), PLANS (file),
// REDIS_URL (share limits between several gateway processes through Redis), KEY_PREFIX (of the
// limiter's Redis keys, default 'tl:').
// GET /metrics: Prometheus metrics; GET /healthz: limiter.stats() as JSON (both answered by the
// gateway, never proxied or limited).
import http, { type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { Registry } from 'prom-client';
// In your project: import { Plans, rateLimit } from 'tokenlease/http', { prometheusObserver } from
// 'tokenlease/prometheus' and the rest from 'tokenlease'.
import { Plans, rateLimit } from '../../src/http/index.js';
import { Limiter, MemoryStore, quotaAlerts, RedisStore } from '../../src/index.js';
import { prometheusObserver } from '../../src/observe/prometheus.js';

const host = '127.0.0.1';
const port = Number(process.env.PORT ?? 8080);
const plansFile = process.env.PLANS ?? fileURLToPath(new URL('./plans.yaml', import.meta.url));

const plans = Plans.fromFile(plansFile);
const redis = process.env.REDIS_URL ? new Redis(process.env.REDIS_URL) : undefined;
redis?.on('error', (err) => console.error('redis:', err.message));
const store = redis
  ? new RedisStore({ client: redis, prefix: process.env.KEY_PREFIX ?? 'tl:' })
  : new MemoryStore();
const registry = new Registry();
const limiter = new Limiter({
  store,
  policies: plans.policies,
  observers: [
    prometheusObserver({ registry }),
    // Where a real gateway would send an e-mail or a webhook.
    quotaAlerts({
      onThreshold: (e) => console.log(`quota: ${e.key} reached ${e.threshold * 100} % of "${e.policy}"`),
    }),
  ],
});
plans.watch({
  limiter,
  onReload: (change) => console.log('plans reloaded:', JSON.stringify(change)),
  onError: (err) => console.error(`plans rejected, previous config still running:\n  ${err.message}`),
});

const limit = rateLimit({
  limiter,
  plans,
  trustProxy: ['loopback'],
  hideRemaining: ['/public/*'],
  onShadowExceeded: (req, info) =>
    console.log(
      `shadow: ${req.method} ${req.url} by ${info.key} would be refused by ${info.shadowExceeded.join(', ')}`,
    ),
  onError: (err) => console.error('rate limiter:', err),
});

const server = http.createServer((req, res) => {
  proxy(req, res).catch((err) => {
    console.error(err);
    if (!res.headersSent) res.writeHead(500);
    res.end();
  });
});
/** Keeps connections to the upstream open between requests; destroyed on shutdown. */
const upstreamAgent = new http.Agent({ keepAlive: true });

const upstream = new URL(process.env.UPSTREAM ?? (await startDemoUpstream().catch(exitWith)));

/** Headers that describe one connection, not the message, and are not forwarded (RFC 9110 7.6.1). */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

function forwardHeaders(headers: IncomingHttpHeaders, peer: string | undefined): IncomingHttpHeaders {
  const out: IncomingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers)) if (!HOP_BY_HOP.has(name)) out[name] = value;
  const prior = headers['x-forwarded-for'];
  out['x-forwarded-for'] = [prior, peer].filter(Boolean).join(', ');
  out.host = upstream.host;
  return out;
}

/**
 * The gateway's own endpoints, whatever the method (HEAD gets the headers; others 405), so a probe
 * never reaches the upstream or spends a client's limit. In production put them on a port only
 * your monitoring reaches.
 */
async function admin(req: IncomingMessage, res: ServerResponse): Promise<boolean> {
  if (req.url !== '/metrics' && req.url !== '/healthz') return false;
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    res.writeHead(405, { Allow: 'GET, HEAD' });
    res.end();
    return true;
  }
  if (req.url === '/metrics') {
    const text = await registry.metrics();
    res.writeHead(200, { 'Content-Type': registry.contentType });
    res.end(text);
    return true;
  }
  res.writeHead(200, { 'Content-Type': 'application/json' });
  res.end(JSON.stringify(limiter.stats()));
  return true;
}

async function proxy(req: IncomingMessage, res: ServerResponse): Promise<void> {
  if (await admin(req, res)) return;
  if (!(await limit(req, res))) return; // refused: 429 (or 403 / 503) already sent
  const out = http.request(
    {
      host: upstream.hostname,
      port: upstream.port,
      method: req.method,
      path: req.url,
      headers: forwardHeaders(req.headers, req.socket.remoteAddress),
      agent: upstreamAgent,
    },
    (answer) => {
      // The gateway's own rate-limit headers (already on res) win over the upstream's.
      const headers = Object.entries(answer.headers).filter(
        ([name]) => !HOP_BY_HOP.has(name) && !res.hasHeader(name),
      );
      res.writeHead(answer.statusCode ?? 502, Object.fromEntries(headers));
      answer.pipe(res);
    },
  );
  out.on('error', () => {
    if (!res.headersSent) res.writeHead(502, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify({ error: 'bad_gateway', message: 'The upstream did not answer.' }));
  });
  req.pipe(out);
}

await listen(server, port, 'port').catch(exitWith);
console.log(`gateway on http://${host}:${port} -> ${upstream.origin}, plans from ${plansFile}`);

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => void shutdown());
}

/**
 * Stops taking requests, hands leased tokens back (limiter.close), then closes the store's own
 * connection and the Redis client. Nothing is left open, so the process then exits by itself.
 */
async function shutdown(): Promise<void> {
  plans.close();
  const closed = new Promise((resolve) => server.close(resolve));
  await limiter.close();
  await store.close();
  await redis?.quit();
  await closed;
  upstreamAgent.destroy();
}

/** Startup failed with a message for the operator: close what was opened and exit with 1. */
async function exitWith(err: Error): Promise<never> {
  console.error(`gateway: ${err.message}`);
  process.exitCode = 1;
  await shutdown();
  process.exit();
}

/** Listens on host:port; a taken port is an error that says which and what to change, not a stack. */
function listen(target: http.Server, at: number, what: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (err: NodeJS.ErrnoException) =>
      reject(
        err.code === 'EADDRINUSE'
          ? new Error(`${what} ${at} on ${host} is already in use; set PORT to a free port`)
          : err,
      );
    target.once('error', onError);
    target.listen(at, host, () => {
      target.off('error', onError);
      resolve();
    });
  });
}

/** A stand-in backend that echoes what it got, so the proxying is visible. */
async function startDemoUpstream(): Promise<string> {
  const demo = http.createServer((req, res) => {
    res.setHeader('Content-Type', 'application/json');
    res.end(
      JSON.stringify({
        upstream: 'demo',
        method: req.method,
        path: req.url,
        forwardedFor: req.headers['x-forwarded-for'],
      }),
    );
  });
  const demoPort = port + 1;
  await listen(demo, demoPort, 'demo upstream (PORT + 1) port');
  demo.unref();
  return `http://${host}:${demoPort}`;
}
