import { afterAll, describe, expect, it } from 'vitest';
import { Limiter, RedisStore } from '../../src/index.js';
import { closeAllClients, redisClient, uniquePrefix } from '../support/clients.js';

afterAll(closeAllClients);

/** Blocks the event loop, as a long GC pause or a synchronous parse in the gateway would. */
function stall(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // busy: nothing else runs meanwhile
  }
}

describe('an event-loop stall longer than the store timeout', () => {
  it('a reply that arrived during the stall is read, not lost to its timer', async () => {
    const store = new RedisStore({ client: redisClient(), prefix: uniquePrefix('stall'), timeoutMs: 50 });
    await store.ready();
    const limiter = new Limiter({
      store,
      policies: { p: { algorithm: 'token-bucket', rate: 10, burst: 10, lease: 'exact' } },
    });
    // Warm: the script is loaded and the connection is idle.
    await limiter.consume('p', 'warm');
    const decision = limiter.consume('p', 'k');
    // The call is sent at the end of this turn; Redis answers while the loop is blocked, and when
    // it unblocks, the timers phase (where the 50 ms timeout is due) runs before the poll phase
    // that reads the answer.
    setTimeout(() => stall(200), 5);
    const d = await decision;
    expect(limiter.stats().storeErrors, 'no call timed out').toBe(0);
    expect(d.source, 'decided by Redis, not by the fail policy').not.toBe('fallback');
    expect(d.remaining).toBe(9);
    await limiter.close();
    await store.close();
  });
});
