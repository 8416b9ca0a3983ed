import type { Redis } from 'ioredis';
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
    // A timeout a loaded machine's round trip stays under, and a stall far longer than both.
    const timeoutMs = 250;
    const store = new RedisStore({ client: redisClient(), prefix: uniquePrefix('stall'), timeoutMs });
    await store.ready();
    const limiter = new Limiter({
      store,
      policies: { p: { algorithm: 'token-bucket', rate: 10, burst: 10, lease: 'exact' } },
    });
    // Warm: the script is loaded and the connection is idle.
    await limiter.consume('p', 'warm');
    // The loop blocks right after the call is written to the socket: Redis answers meanwhile, and
    // when the loop unblocks, the timers phase (where the timeout is due) runs before the poll
    // phase that reads the answer.
    const connection = store.client as Redis;
    const send = connection.sendCommand.bind(connection);
    let armed = true;
    connection.sendCommand = ((command) => {
      const sent = send(command);
      if (armed) {
        armed = false;
        stall(4 * timeoutMs);
      }
      return sent;
    }) as Redis['sendCommand'];
    const errorsBefore = limiter.stats().storeErrors;
    const d = await limiter.consume('p', 'k');
    expect(armed, 'the call was sent, and the loop stalled').toBe(false);
    expect(limiter.stats().storeErrors - errorsBefore, 'no call timed out').toBe(0);
    expect(d.source, 'decided by Redis, not by the fail policy').not.toBe('fallback');
    expect(d.remaining).toBe(9);
    await limiter.close();
    await store.close();
  });

  // Calls made in a turn that itself outlasts timeoutMs (a flood of new keys at start-up, while the
  // code is JIT-cold; synchronous work in the gateway) cannot be sent before the turn ends: the turn
  // is the gateway's time, not the store's. Found in the third operator trial: their deadlines ran
  // from when each call was made, had passed when the batch went out, and 744 of 1000 new keys at
  // once went to the fail policy on a healthy Redis, opening the breaker.
  it('calls made in a turn longer than the timeout are answered by a healthy store', async () => {
    const store = new RedisStore({ client: redisClient(), prefix: uniquePrefix('stalled'), timeoutMs: 50 });
    await store.ready();
    const limiter = new Limiter({
      store,
      policies: { p: { algorithm: 'fixed-window', limit: 100, window: '1m', lease: 'exact' } },
    });
    const decisions = Array.from({ length: 20 }, (_, i) => limiter.consume('p', `new-${i}`));
    stall(120);
    const answered = await Promise.all(decisions);
    const stats = limiter.stats();
    await limiter.close();
    await store.close();
    expect(answered.map((d) => d.source)).toEqual(answered.map(() => 'store'));
    expect(stats.storeErrors, 'no call counted as failed').toBe(0);
    expect(stats.breaker).toBe('closed');
  });
});
