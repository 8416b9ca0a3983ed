import { Redis } from 'ioredis';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { Limiter, RedisStore } from '../../src/index.js';
import { closeAllClients, trackClient, uniquePrefix } from '../support/clients.js';

afterAll(closeAllClients);

const policies = { p: { algorithm: 'token-bucket' as const, rate: 10, burst: 10 } };

describe('a store used before its connection is ready', () => {
  it('waits for the connection (within the timeout) instead of failing into the fail policy', async () => {
    // Connecting, not connected: the store is used at once, as a gateway starting up would.
    const client = trackClient(new Redis(inject('redisUrl')));
    const store = new RedisStore({ client, prefix: uniquePrefix('startup'), timeoutMs: 1000 });
    const limiter = new Limiter({ store, policies });
    const decisions = await Promise.all(
      Array.from({ length: 20 }, (_, i) => limiter.consume('p', `k${i % 4}`)),
    );
    expect(
      decisions.map((d) => d.source),
      'decided by the store, not by the fail policy',
    ).not.toContain('fallback');
    expect(limiter.stats().fallbackDecisions).toBe(0);
    expect(decisions.filter((d) => d.allowed).length).toBe(20);
    await limiter.close();
    await store.close();
  });
});

describe('a flood of new keys', () => {
  it('more keys waiting on the store than maxKeys: every request still gets its own bucket and nothing is fetched twice', async () => {
    const client = trackClient(
      new Redis(inject('redisUrl'), { enableOfflineQueue: false, autoResendUnfulfilledCommands: false }),
    );
    // A generous timeout: this is about accounting, not latency on a loaded machine.
    const store = new RedisStore({ client, prefix: uniquePrefix('flood'), timeoutMs: 5000 });
    await store.ready();
    const limiter = new Limiter({ store, policies, maxKeys: 100, sweepIntervalMs: 0 });
    const decisions = await Promise.all(
      Array.from({ length: 3000 }, (_, i) => limiter.consume('p', `new-${i}`)),
    );
    const denied = decisions.filter((d) => !d.allowed);
    expect(denied.length, 'a fresh bucket of 10 admits its first request').toBe(0);
    expect(limiter.stats().fallbackDecisions, 'no call timed out into the fail policy').toBe(0);
    // 3000 keys were batched into a few round trips, not 3000 of them (or 11 per request as before).
    expect(store.roundTrips, 'round trips for 3000 new keys').toBeLessThan(300);
    expect(limiter.stats().storeCalls, 'one acquisition per key, nothing fetched again').toBeLessThan(
      3000 * 2,
    );
    await limiter.close();
    await store.close();
  });
});
