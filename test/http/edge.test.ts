import { afterEach, describe, expect, it } from 'vitest';
import {
  ADAPTERS,
  type AdapterName,
  memoryLimiter,
  type Running,
  rawRequest,
  startServer,
  tokenBucket,
  virtualClock,
} from './servers.js';

let cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const fn of cleanup.reverse()) await fn();
  cleanup = [];
});

/** Burst 5 per client, keyed by API key (falling back to IP), trusting loopback proxies. */
async function serve(adapter: AdapterName): Promise<Running> {
  const clock = virtualClock();
  const limiter = memoryLimiter({ 'per-key': tokenBucket(1, '1m', 5) }, clock.now);
  const running = await startServer(adapter, {
    limiter,
    rules: [{ policy: 'per-key', by: 'apiKey' }],
    trustProxy: ['loopback'],
    now: clock.now,
  });
  cleanup.push(
    () => limiter.close(),
    () => running.close(),
  );
  return running;
}

const request = (head: string, extra: Buffer = Buffer.alloc(0)) =>
  Buffer.concat([Buffer.from(head, 'latin1'), extra, Buffer.from('\r\nConnection: close\r\n\r\n', 'latin1')]);

describe.each(ADAPTERS)('bad input at the edge (%s)', (adapter) => {
  it('treats a 10 KB API key as no key: counted by IP, answered normally', async () => {
    const server = await serve(adapter);
    const huge = 'k'.repeat(10 * 1024);
    const res = await rawRequest(
      server.port,
      request(`GET /profile HTTP/1.1\r\nHost: x\r\nX-API-Key: ${huge}`),
    );
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body).rateLimit.key).toBe('ip=127.0.0.1');
    expect(res.headers.ratelimit).toBe('"per-key";r=4;t=60');
  });

  it('answers a request carrying a 10 KB header of separators and non-ASCII bytes', async () => {
    const server = await serve(adapter);
    const res = await rawRequest(
      server.port,
      request(`GET /profile HTTP/1.1\r\nHost: x\r\nX-Junk: ${';,="\xa0\xfe\\'.repeat(1536)}`),
    );
    expect(res.status).toBe(200);
  });

  it('treats an API key with non-UTF-8 bytes as no key', async () => {
    const server = await serve(adapter);
    const res = await rawRequest(
      server.port,
      request(
        'GET /profile HTTP/1.1\r\nHost: x\r\nX-API-Key: ',
        Buffer.from([0xff, 0xfe, 0x80, 0x41, 0xc3, 0x28]),
      ),
    );
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body).rateLimit.key).toBe('ip=127.0.0.1');
  });

  it('never answers 5xx to non-UTF-8 bytes or broken escapes in the path, and keeps serving', async () => {
    const server = await serve(adapter);
    const raw = await rawRequest(
      server.port,
      Buffer.concat([
        Buffer.from('GET /prof', 'latin1'),
        Buffer.from([0xe9, 0xff]),
        Buffer.from('ile HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n', 'latin1'),
      ]),
    );
    expect(raw.status, 'raw bytes in the path').toBeGreaterThanOrEqual(400);
    expect(raw.status).toBeLessThan(500);
    const escaped = await fetch(`${server.url}/users/%ff%fe%E0%80`);
    expect(escaped.status, 'invalid UTF-8 escapes').toBeLessThan(500);
    expect((await fetch(`${server.url}/profile`)).status, 'still serving').toBe(200);
  });

  it('stops at garbage in X-Forwarded-For from a trusted proxy and counts the proxy hop', async () => {
    const server = await serve(adapter);
    const res = await fetch(`${server.url}/profile`, {
      headers: { 'x-forwarded-for': `<script>, ${'1.2.3.4, '.repeat(500)}not-an-ip` },
    });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { rateLimit: { key: string } }).rateLimit.key).toBe('ip=127.0.0.1');
  });

  it('leaves a header block over the server limit to Node (431), and keeps serving', async () => {
    const server = await serve(adapter);
    const res = await rawRequest(
      server.port,
      request(`GET /profile HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20 * 1024)}`),
    );
    expect(res.status).toBe(431);
    expect((await fetch(`${server.url}/profile`)).status).toBe(200);
  });
});
