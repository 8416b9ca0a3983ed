// Issue 12 item 4: the decision behind a refusal's headers is truthful. For every time-based
// algorithm, on MemoryStore and on real Redis (both on a virtual clock), a client refused with
// `Retry-After: n` (and `t=n` in `RateLimit`) that waits exactly n seconds is admitted.
import type { IncomingMessage } from 'node:http';
import { afterAll, describe, expect, it } from 'vitest';
import { nodeView, RateLimitCore } from '../../src/http/index.js';
import { Limiter, MemoryStore, type PolicyConfig, RedisStore, type Store } from '../../src/index.js';
import { closeAllClients, redisClient, uniquePrefix } from '../support/clients.js';

afterAll(closeAllClients);

const POLICIES: Record<string, PolicyConfig> = {
  'fixed-window leased': { algorithm: 'fixed-window', limit: 30, window: '1m' },
  'sliding-window leased': { algorithm: 'sliding-window', limit: 30, window: '1m' },
  'token-bucket exact': { algorithm: 'token-bucket', rate: 2, period: '3s', burst: 2, lease: 'exact' },
  'token-bucket leased': { algorithm: 'token-bucket', rate: 20, period: '3s', burst: 20 },
  'fixed-window exact': { algorithm: 'fixed-window', limit: 3, window: '10s', lease: 'exact' },
  'fixed-window first-hit exact': {
    algorithm: 'fixed-window',
    limit: 3,
    window: '10s',
    anchor: 'first-hit',
    lease: 'exact',
  },
  'sliding-window exact': { algorithm: 'sliding-window', limit: 3, window: '10s', lease: 'exact' },
  'sliding-log': { algorithm: 'sliding-log', limit: 3, window: '10s' },
  'sliding-log quantised': { algorithm: 'sliding-log', limit: 3, window: '10s', quantum: '1s' },
  'leaky-bucket': { algorithm: 'leaky-bucket', rate: 1, period: '2s', burst: 2 },
};

// A leased window refuses with "look again" times (the lease TTL), not when the quota frees up.

const request = (ip: string) =>
  ({ method: 'GET', url: '/', headers: {}, socket: { remoteAddress: ip } }) as unknown as IncomingMessage;

function header(headers: readonly [string, string][], name: string): string | undefined {
  return headers.find(([n]) => n === name)?.[1];
}

/** Refuses a client, then waits exactly Retry-After on the virtual clock: it must pass. */
async function waitExactlyRetryAfter(policy: PolicyConfig, store: (now: () => number) => Promise<Store>) {
  const clock = { t: 1_700_000_000_123 };
  const now = () => clock.t;
  const limiter = new Limiter({ store: await store(now), now, policies: { p: policy }, sweepIntervalMs: 0 });
  const core = new RateLimitCore({ limiter, rules: [{ policy: 'p' }], now }, nodeView);
  try {
    let outcome = await core.check(request('192.0.2.1'));
    for (let i = 0; i < 100 && outcome.action === 'next'; i++) {
      clock.t += 10; // a busy client, 100 requests a second
      outcome = await core.check(request('192.0.2.1'));
    }
    expect(outcome.action, 'refused at last').toBe('refuse');
    const retryAfter = Number(header(outcome.headers, 'Retry-After'));
    const t = Number(/;t=(\d+)/.exec(header(outcome.headers, 'RateLimit') ?? '')?.[1]);
    expect(retryAfter, 'Retry-After in whole seconds').toBeGreaterThan(0);
    expect(t, 'RateLimit t of the refusing rule').toBe(retryAfter);
    clock.t += retryAfter * 1000;
    const after = await core.check(request('192.0.2.1'));
    expect(after.action, `admitted after waiting Retry-After (${retryAfter} s)`).toBe('next');
  } finally {
    await limiter.close();
  }
}

const memory = async (now: () => number) => new MemoryStore({ now });
const redis = async (now: () => number) => {
  const s = new RedisStore({ client: redisClient(), prefix: uniquePrefix('truthful'), now, timeoutMs: 2000 });
  await s.ready();
  return s;
};

describe.each([
  ['MemoryStore', memory],
  ['Redis', redis],
] as const)('on %s: waiting exactly Retry-After passes', (_name, store) => {
  it.each(Object.entries(POLICIES))('%s', async (_policy, policy) => {
    await waitExactlyRetryAfter(policy, store);
  });
});
