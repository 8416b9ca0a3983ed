import { describe, expect, it } from 'vitest';
import { Limiter, MemoryStore } from '../../src/index.js';

describe("fixed window with anchor: 'first-hit'", () => {
  // Exact only: a leased window's refusal says when to look again, not when the window ends
  // (issue 13 item 4, in the lease core).
  for (const lease of ['exact'] as const) {
    it(`opens at a key's first request and closes a whole window later (lease ${lease})`, async () => {
      const clock = { t: 1_700_000_017_777 };
      const now = () => clock.t;
      const limiter = new Limiter({
        store: new MemoryStore({ now }),
        now,
        sweepIntervalMs: 0,
        policies: { w: { algorithm: 'fixed-window', limit: 2, window: '10s', anchor: 'first-hit', lease } },
      });
      const first = await limiter.consume('w', 'k');
      expect(first.resetMs, 'a whole window from the first hit').toBe(10_000);
      clock.t += 4_000;
      expect((await limiter.consume('w', 'k')).allowed).toBe(true);
      const refused = await limiter.consume('w', 'k');
      expect(refused.allowed).toBe(false);
      expect(refused.retryAfterMs, 'until the window that opened at the first hit ends').toBe(6_000);
      clock.t += refused.retryAfterMs;
      expect((await limiter.consume('w', 'k')).allowed, 'waiting exactly retryAfterMs passes').toBe(true);
      await limiter.close();
    });
  }

  it('is validated naming the field', () => {
    const make = (policy: object) => () =>
      new Limiter({ policies: { p: policy as never }, sweepIntervalMs: 0 });
    expect(make({ algorithm: 'fixed-window', limit: 1, window: '1s', anchor: 'first' })).toThrow(
      'Invalid `policies.p.anchor`',
    );
    expect(make({ algorithm: 'fixed-window', limit: 1, window: 'month', anchor: 'first-hit' })).toThrow(
      'Invalid `policies.p.anchor`',
    );
    expect(make({ algorithm: 'sliding-window', limit: 1, window: '1s', anchor: 'first-hit' })).toThrow(
      'Invalid `policies.p.anchor`',
    );
  });
});
