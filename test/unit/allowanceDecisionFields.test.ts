/**
 * A decision admitted within a write-behind allowance tells the truth about the window: the usage
 * it admitted is in no store reply yet, but the counter is no longer at zero, so `resetMs` is the
 * time until it is (the HTTP adapters send it as `t` and `X-RateLimit-Reset`). Before the fix a
 * leased window reported `resetMs: 0` on every decision once the fleet was counted, i.e. in any
 * process running for more than half a second.
 */
import { describe, expect, it } from 'vitest';
import { Limiter, MemoryStore } from '../../src/index.js';
import { countFleet } from '../support/virtualFleet.js';

const WINDOW = 3_600_000;

async function fleetOfOne(policy: object) {
  // 10 minutes into a window of an hour.
  let t = 1_000 * WINDOW + 600_000;
  const now = () => t;
  const limiter = new Limiter({
    store: new MemoryStore({ now }),
    policies: { p: policy as never, exact: { ...policy, lease: 'exact' } as never },
    now,
    sweepIntervalMs: 0,
  });
  await countFleet([limiter], (ms) => {
    t += ms;
  });
  return { limiter, msToWindowEnd: () => WINDOW - (t % WINDOW) };
}

describe('resetMs of decisions under a write-behind allowance', () => {
  it('fixed window: the time to the end of the window, as the exact policy says', async () => {
    const { limiter, msToWindowEnd } = await fleetOfOne({
      algorithm: 'fixed-window',
      limit: 1000,
      window: '1h',
    });
    for (let i = 0; i < 3; i++) {
      const leased = await limiter.consume('p', 'k');
      const exact = await limiter.consume('exact', 'k');
      expect(leased.remaining, `decision ${i}: remaining`).toBe(999 - i);
      expect(exact.resetMs, 'the exact policy: to the window end').toBe(msToWindowEnd());
      expect(leased.resetMs, `decision ${i} (source ${leased.source}): to the window end`).toBe(
        msToWindowEnd(),
      );
    }
    await limiter.close();
  });

  it('sliding window: the end of the next window, as the exact policy says', async () => {
    const { limiter, msToWindowEnd } = await fleetOfOne({
      algorithm: 'sliding-window',
      limit: 1000,
      window: '1h',
    });
    for (let i = 0; i < 3; i++) {
      const leased = await limiter.consume('p', 'k');
      const exact = await limiter.consume('exact', 'k');
      expect(exact.resetMs, 'the exact policy: the counter weighs until the next window ends').toBe(
        msToWindowEnd() + WINDOW,
      );
      expect(leased.resetMs, `decision ${i} (source ${leased.source})`).toBe(msToWindowEnd() + WINDOW);
    }
    await limiter.close();
  });
});
