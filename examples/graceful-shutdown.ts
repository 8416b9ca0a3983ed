/**
 * A minimal gateway that hands its leased tokens back on SIGTERM (docs/operations.md).
 *
 *   REDIS_URL=redis://127.0.0.1:6379 npx tsx examples/graceful-shutdown.ts
 *   curl 'http://127.0.0.1:<port>/?key=client-42'
 *
 * Without the SIGTERM handler, a rolling deploy would strand every instance's unused leases in the
 * shared bucket until it refills (for a daily quota: until tomorrow).
 */
import { createServer } from 'node:http';
import { Redis } from 'ioredis';
import { Limiter, RedisStore } from '../src/index.js'; // in an application: from 'tokenlease'

const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
redis.on('error', (err) => console.error('redis:', err.message));
const store = new RedisStore({
  client: redis,
  prefix: process.env.KEY_PREFIX ?? 'tl:',
  timeoutMs: Number(process.env.REDIS_TIMEOUT_MS ?? 50),
});
const limiter = new Limiter({
  store,
  policies: { daily: { algorithm: 'token-bucket', rate: 10_000, period: '1d', burst: 10_000 } },
});

const server = createServer(async (req, res) => {
  const key = new URL(req.url ?? '/', 'http://localhost').searchParams.get('key') ?? 'anonymous';
  const d = await limiter.consume('daily', key);
  if (d.allowed) {
    res.writeHead(200, { 'content-type': 'text/plain' }).end('ok\n');
  } else {
    const retry = Number.isFinite(d.retryAfterMs) ? Math.ceil(d.retryAfterMs / 1000) : 86_400;
    res.writeHead(429, { 'retry-after': String(retry) }).end('too many requests\n');
  }
});

process.once('SIGTERM', async () => {
  // Stop taking requests, let the ones in flight finish, then hand back every unused leased token.
  await new Promise((resolve) => server.close(resolve));
  await limiter.close();
  await store.close();
  await redis.quit();
  process.exit(0);
});

server.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
  const address = server.address();
  console.log(`listening ${typeof address === 'object' && address ? address.port : address}`);
});
