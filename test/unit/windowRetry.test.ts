import { describe, expect, it } from 'vitest';
import { Limiter, MemoryStore } from '../../src/index.js';

const HOUR = 3_600_000;

describe.each(['fixed-window', 'sliding-window'] as const)('a leased %s refusal', (algorithm) => {
  it('reports when the quota has room again, not when this instance looks again', async () => {
    // 17 minutes into an hour-aligned window.
    let t = 1_700_000_000_000 - (1_700_000_000_000 % HOUR) + 17 * 60_000;
    const now = () => t;
    const store = new MemoryStore({ now });
    const policies = { q: { algorithm, limit: 5, window: '1h' as const } };
    const limiter = new Limiter({ store, policies, now, sweepIntervalMs: 0 });
    const exact = new Limiter({
      store: new MemoryStore({ now }),
      policies: { q: { ...policies.q, lease: 'exact' as const } },
      now,
      sweepIntervalMs: 0,
    });
    for (let i = 0; i < 5; i++) {
      expect((await limiter.consume('q', 'k')).allowed).toBe(true);
      expect((await exact.consume('q', 'k')).allowed).toBe(true);
    }
    const refused = await limiter.consume('q', 'k');
    const reference = await exact.consume('q', 'k');
    expect(refused.allowed).toBe(false);
    expect(refused.retryAfterMs, 'no earlier than the exact limiter says').toBeGreaterThanOrEqual(
      reference.retryAfterMs,
    );
    expect(refused.retryAfterMs, 'far more than the 2 s lease time').toBeGreaterThan(60_000);
    // Asked again from the local denial memory, it still says the same time.
    t += 1000;
    const again = await limiter.consume('q', 'k');
    expect(again.retryAfterMs).toBeGreaterThanOrEqual(reference.retryAfterMs - 1000);
    // And a client that waits exactly that long passes.
    t += again.retryAfterMs;
    expect((await limiter.consume('q', 'k')).allowed, 'allowed after waiting retryAfterMs').toBe(true);
    await limiter.close();
    await exact.close();
  });
});
