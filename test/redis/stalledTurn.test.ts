/**
 * Calls made in an event-loop turn that itself outlasts `timeoutMs` (a flood of new keys at start-up,
 * when JIT-cold code costs tens of µs per request; synchronous work in the gateway). They cannot be
 * sent before the turn ends, so the turn is the gateway's time, not the store's: found in the third
 * operator trial, 744 of 1000 new keys at once went to the fail policy on a healthy Redis and the
 * breaker opened, because each call's deadline ran from when it was made and had passed by the
 * time its batch went out. A call's `timeoutMs` now starts when the turn it was made in ends.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { Limiter, RedisStore } from '../../src/index.js';
import { closeAllClients, redisClient, uniquePrefix } from '../support/clients.js';

afterAll(closeAllClients);

/** Keeps the event loop busy for `ms`, as synchronous request handling would. */
function busy(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    // spin
  }
}

describe('calls made in a turn longer than timeoutMs', () => {
  it('are answered by a healthy store, not the fail policy, and the breaker stays closed', async () => {
    const store = new RedisStore({ client: redisClient(), prefix: uniquePrefix('stalled'), timeoutMs: 50 });
    await store.ready();
    const limiter = new Limiter({
      store,
      policies: { p: { algorithm: 'fixed-window', limit: 100, window: '1m', lease: 'exact' } },
    });
    const decisions = Array.from({ length: 20 }, (_, i) => limiter.consume('p', `new-${i}`));
    busy(120);
    const answered = await Promise.all(decisions);
    const stats = limiter.stats();
    await limiter.close();
    await store.close();
    expect(answered.map((d) => d.source)).toEqual(answered.map(() => 'store'));
    expect(stats.storeErrors, 'no call counted as failed').toBe(0);
    expect(stats.breaker).toBe('closed');
  });
});
