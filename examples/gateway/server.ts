// A small reverse proxy in front of an upstream, rate limited by the plans in plans.yaml.
//   npm run example:gateway       (gateway on 127.0.0.1:8080, demo upstream on 127.0.0.1:8081)
// Environment: PORT, UPSTREAM (an existing upstream URL instead of the demo one), PLANS (file),
// REDIS_URL (share limits between several gateway processes through Redis).
// GET /metrics: Prometheus metrics; GET /healthz: limiter.stats() as JSON (both answered by the gateway).
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
const registry = new Registry();
const limiter = new Limiter({
  store: redis ? new RedisStore({ client: redis }) : new MemoryStore(),
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

const upstream = new URL(process.env.UPSTREAM ?? (await startDemoUpstream()));

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

/** The gateway's own endpoints; in production put them on a port only your monitoring reaches. */
async function admin(req: IncomingMessage, res: ServerResponse): Promise<boolean> {
  if (req.method !== 'GET') return false;
  if (req.url === '/metrics') {
    const text = await registry.metrics();
    res.writeHead(200, { 'Content-Type': registry.contentType });
    res.end(text);
    return true;
  }
  if (req.url === '/healthz') {
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify(limiter.stats()));
    return true;
  }
  return false;
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

const server = http.createServer((req, res) => {
  proxy(req, res).catch((err) => {
    console.error(err);
    if (!res.headersSent) res.writeHead(500);
    res.end();
  });
});
server.listen(port, host, () => {
  console.log(`gateway on http://${host}:${port} -> ${upstream.origin}, plans from ${plansFile}`);
});

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, async () => {
    plans.close();
    server.close();
    await limiter.close(); // hands leased tokens back to the store
    await redis?.quit();
    process.exit(0);
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
  await new Promise<void>((resolve) => demo.listen(demoPort, host, resolve));
  demo.unref();
  return `http://${host}:${demoPort}`;
}
