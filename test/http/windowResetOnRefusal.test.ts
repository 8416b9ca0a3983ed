/**
 * A refusal by one rule must not change when another rule's window resets. Found in the operator
 * trial with the README's Express sample (a per-second bucket and a daily window by API key): the
 * 429 of the bucket said `"daily";r=999994;t=1`, a daily quota resetting in one second, where the
 * requests before it said `t=77385`. The core cuts the `t` of every rule that did not refuse to
 * Retry-After ("by then it has refilled some"), which holds for a bucket but not for a window: it
 * resets at its end, whatever Retry-After says.
 */
import { afterEach, describe, expect, it } from 'vitest';
import {
  ADAPTERS,
  memoryLimiter,
  parseRateLimit,
  type Running,
  startServer,
  tokenBucket,
  virtualClock,
} from './servers.js';

const cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const done of cleanup.splice(0)) await done();
});

describe.each(ADAPTERS)('%s: a bucket refuses, an hourly window admits', (adapter) => {
  it("the window's t on the 429 is its t on the request before", async () => {
    const clock = virtualClock();
    const limiter = memoryLimiter(
      { perMinute: tokenBucket(1, '1m', 1), hourly: { algorithm: 'fixed-window', limit: 100, window: '1h' } },
      clock.now,
    );
    const server: Running = await startServer(adapter, {
      limiter,
      rules: [{ policy: 'perMinute' }, { policy: 'hourly', weighted: false }],
      now: clock.now,
    });
    cleanup.push(
      () => server.close(),
      () => limiter.close(),
    );
    const tOf = (header: string | null) => parseRateLimit(header).find((e) => e.name === 'hourly')?.t;
    const admitted = await fetch(`${server.url}/profile`);
    const refused = await fetch(`${server.url}/profile`);
    expect([admitted.status, refused.status]).toEqual([200, 429]);
    expect(Number(refused.headers.get('retry-after')), 'the bucket refills in a minute').toBe(60);
    const before = tOf(admitted.headers.get('ratelimit'));
    expect(before, 'the hourly window ends later than Retry-After').toBeGreaterThan(60);
    expect(tOf(refused.headers.get('ratelimit')), 'the hourly window still ends then').toBe(before);
  });
});
