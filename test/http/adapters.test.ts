import { afterEach, describe, expect, it } from 'vitest';
import type { RateLimitInfo } from '../../src/http/index.js';
import type { Limiter } from '../../src/index.js';
import {
  ADAPTERS,
  type AdapterName,
  type CommonOptions,
  memoryLimiter,
  parseRateLimit,
  type Running,
  startServer,
  tokenBucket,
  virtualClock,
} from './servers.js';

let cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const fn of cleanup.reverse()) await fn();
  cleanup = [];
});

async function serve(
  adapter: AdapterName,
  limiter: Limiter,
  options: Omit<CommonOptions, 'limiter'>,
): Promise<Running> {
  const running = await startServer(adapter, { limiter, ...options });
  cleanup.push(
    () => limiter.close(),
    () => running.close(),
  );
  return running;
}

describe.each(ADAPTERS)('%s adapter', (adapter) => {
  it('puts RateLimit-Policy and RateLimit on allowed responses, listing every rule by name', async () => {
    const clock = virtualClock();
    const limiter = memoryLimiter(
      { 'per-key': tokenBucket(100), daily: tokenBucket(1_000_000, '1d') },
      clock.now,
    );
    const server = await serve(adapter, limiter, {
      rules: [{ policy: 'per-key' }, { policy: 'daily', weighted: false }],
      now: clock.now,
    });
    const res = await fetch(`${server.url}/profile`);
    expect(res.status).toBe(200);
    expect(res.headers.get('ratelimit-policy')).toBe('"per-key";q=100;w=1, "daily";q=1000000;w=86400');
    const items = parseRateLimit(res.headers.get('ratelimit'));
    expect(items.map((i) => [i.name, i.r])).toEqual([
      ['per-key', 99],
      ['daily', 999_999],
    ]);
    expect(res.headers.get('retry-after'), 'only refusals carry Retry-After').toBeNull();
  });

  it('refuses the (N+1)-th request with 429, a JSON body and a Retry-After no earlier than any t; a retry after it passes', async () => {
    const clock = virtualClock();
    // 1 token per 10 s, burst 3: the 4th request has to wait exactly 10 s.
    const limiter = memoryLimiter(
      { 'per-client': tokenBucket(1, '10s', 3), daily: tokenBucket(1000, '1d') },
      clock.now,
    );
    const server = await serve(adapter, limiter, {
      rules: [{ policy: 'per-client' }, { policy: 'daily' }],
      now: clock.now,
    });
    for (let i = 0; i < 3; i++)
      expect((await fetch(`${server.url}/profile`)).status, `request ${i + 1}`).toBe(200);
    const refused = await fetch(`${server.url}/profile`);
    expect(refused.status).toBe(429);
    expect(refused.headers.get('content-type')).toMatch(/^application\/json/);
    const retryAfter = Number(refused.headers.get('retry-after'));
    expect(retryAfter).toBe(10);
    for (const item of parseRateLimit(refused.headers.get('ratelimit'))) {
      expect(item.t, `t of ${item.name}`).toBeLessThanOrEqual(retryAfter);
    }
    expect(await refused.json()).toEqual({
      error: 'rate_limited',
      message: 'Rate limit exceeded ("per-client"): retry in 10 seconds.',
      retryAfter: 10,
      policies: ['per-client'],
    });

    clock.advance(retryAfter * 1000 - 1000);
    expect((await fetch(`${server.url}/profile`)).status, 'one second early').toBe(429);
    clock.advance(1000);
    const retried = await fetch(`${server.url}/profile`);
    expect(retried.status, 'after Retry-After').toBe(200);
  });

  it('counts IPv6 clients by /64 behind a trusted proxy, so rotating addresses in one /64 does not help', async () => {
    const clock = virtualClock();
    const limiter = memoryLimiter({ 'per-ip': tokenBucket(1, '1m', 2) }, clock.now);
    const server = await serve(adapter, limiter, {
      rules: [{ policy: 'per-ip', by: 'ip' }],
      trustProxy: ['loopback'],
      now: clock.now,
    });
    const from = (ip: string) => fetch(`${server.url}/profile`, { headers: { 'x-forwarded-for': ip } });
    expect((await from('2001:db8:aa:1::1')).status).toBe(200);
    expect((await from('2001:db8:aa:1:ffff:ffff:ffff:fffe')).status).toBe(200);
    expect((await from('2001:db8:aa:1:1234::99')).status, 'third address in the same /64').toBe(429);
    expect((await from('2001:db8:aa:2::1')).status, 'the next /64 is another client').toBe(200);
  });

  it('charges each route its cost from the table', async () => {
    const clock = virtualClock();
    const limiter = memoryLimiter({ 'per-client': tokenBucket(25, '10s') }, clock.now);
    const server = await serve(adapter, limiter, {
      rules: [{ policy: 'per-client' }],
      costs: { 'POST /reports': 20, 'GET /profile': 1 },
      now: clock.now,
    });
    const report = () => fetch(`${server.url}/reports`, { method: 'POST' });
    const first = await report();
    expect(first.status).toBe(200);
    expect(parseRateLimit(first.headers.get('ratelimit'))[0]?.r).toBe(5);
    const second = await report();
    expect(second.status, 'a second report needs 20 of the 5 left').toBe(429);
    // 15 more tokens at 2.5 per second.
    expect(second.headers.get('retry-after')).toBe('6');
    const profile = await fetch(`${server.url}/profile`);
    expect(profile.status, 'a profile read still fits').toBe(200);
    // The refused report keeps its place in the queue (tokens leased ahead), so r may show less.
    expect(parseRateLimit(profile.headers.get('ratelimit'))[0]?.r).toBeLessThanOrEqual(4);
  });

  it('in shadow mode decides and reports but never refuses, and keeps the rule out of the headers', async () => {
    const clock = virtualClock();
    const limiter = memoryLimiter(
      { 'per-client': tokenBucket(1, '1m', 2), daily: tokenBucket(100, '1d') },
      clock.now,
    );
    const reported: RateLimitInfo[] = [];
    const server = await serve(adapter, limiter, {
      rules: [{ policy: 'per-client', shadow: true }, { policy: 'daily' }],
      onShadowExceeded: (info) => reported.push(info),
      now: clock.now,
    });
    const bodies: { rateLimit: { shadowExceeded: string[] } }[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await fetch(`${server.url}/profile`);
      expect(res.status, `request ${i + 1}`).toBe(200);
      expect(res.headers.get('ratelimit-policy')).toBe('"daily";q=100;w=86400');
      bodies.push((await res.json()) as (typeof bodies)[number]);
    }
    expect(bodies.map((b) => b.rateLimit.shadowExceeded)).toEqual([
      [],
      [],
      ['per-client'],
      ['per-client'],
      ['per-client'],
    ]);
    expect(reported.length).toBe(3);
    expect(reported[0]?.allowed).toBe(true);
  });

  it('ignores X-Forwarded-For from an untrusted peer: spoofed addresses share the peer bucket', async () => {
    const clock = virtualClock();
    const limiter = memoryLimiter({ 'per-ip': tokenBucket(1, '1m', 2) }, clock.now);
    const server = await serve(adapter, limiter, { rules: [{ policy: 'per-ip', by: 'ip' }], now: clock.now });
    const statuses: number[] = [];
    for (const ip of ['203.0.113.1', '203.0.113.2', '198.51.100.7']) {
      statuses.push((await fetch(`${server.url}/profile`, { headers: { 'x-forwarded-for': ip } })).status);
    }
    expect(statuses).toEqual([200, 200, 429]);
  });

  it('counts requests without the API key by IP (not one shared bucket, never a 500), keys by key', async () => {
    const clock = virtualClock();
    const limiter = memoryLimiter({ 'per-key': tokenBucket(1, '1m', 2) }, clock.now);
    const server = await serve(adapter, limiter, {
      rules: [{ policy: 'per-key', by: 'apiKey' }],
      now: clock.now,
    });
    const statuses: number[] = [];
    for (let i = 0; i < 3; i++) statuses.push((await fetch(`${server.url}/profile`)).status);
    expect(statuses, 'no key: counted by the peer address').toEqual([200, 200, 429]);
    const keyed = await fetch(`${server.url}/profile`, { headers: { 'x-api-key': 'k_live_1' } });
    expect(keyed.status, 'a key has its own bucket').toBe(200);
  });

  it('answers a refusal in application/problem+json with the quota-exceeded type when asked', async () => {
    const clock = virtualClock();
    const limiter = memoryLimiter({ 'per-client': tokenBucket(1, '1m', 1) }, clock.now);
    const server = await serve(adapter, limiter, {
      rules: [{ policy: 'per-client', name: 'burst' }],
      responseFormat: 'problem+json',
      now: clock.now,
    });
    await fetch(`${server.url}/profile`);
    const res = await fetch(`${server.url}/profile`);
    expect(res.status).toBe(429);
    expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(await res.json()).toMatchObject({
      type: 'https://iana.org/assignments/http-problem-types#quota-exceeded',
      status: 429,
      'violated-policies': ['burst'],
      'retry-after': 60,
    });
  });
});
