import { describe, expect, it } from 'vitest';
import { Limiter, type PolicyConfig, quotaAlerts, type ThresholdEvent } from '../../src/index.js';
import { nextFired } from '../../src/observe/thresholds.js';
import { closedAfterEach } from '../support/closedAfterEach.js';

const open = closedAfterEach();

function setup(policies: Record<string, PolicyConfig>, options: { rearmMargin?: number } = {}) {
  let t = 1_000_000;
  const now = () => t;
  const fired: ThresholdEvent[] = [];
  const limiter = new Limiter({
    policies,
    now,
    sweepIntervalMs: 0,
    observers: [quotaAlerts({ onThreshold: (e) => fired.push(e), ...options })],
  });
  open.push(limiter);
  /** Fired so far, as `key@threshold`, and forgets them. */
  const take = () => fired.splice(0).map((e) => `${e.key}@${e.threshold}`);
  return { limiter, fired, take, advance: (ms: number) => (t += ms) };
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

describe('quotaAlerts', () => {
  it('fires 80, 90 and 100 % exactly once per window per key, and again after the bucket refills', async () => {
    const { limiter, fired, take, advance } = setup({
      p: { algorithm: 'token-bucket', rate: 10, burst: 10, lease: 'exact' },
    });
    const firedAt: string[] = [];
    for (let i = 1; i <= 15; i++) {
      await limiter.consume('p', 'a');
      firedAt.push(...take().map((f) => `${i}:${f}`));
    }
    // Decisions 8, 9, 10 leave 2, 1, 0 of 10; decisions 11-15 are denials and fire nothing more.
    expect(firedAt).toEqual(['8:a@0.8', '9:a@0.9', '10:a@1']);

    // Another key has its own window.
    for (let i = 0; i < 12; i++) await limiter.consume('p', 'b');
    expect(take()).toEqual(['b@0.8', 'b@0.9', 'b@1']);

    // A full refill is a new window for 'a': the same three fire once more, in order.
    advance(1000);
    for (let i = 0; i < 20; i++) await limiter.consume('p', 'a');
    expect(take()).toEqual(['a@0.8', 'a@0.9', 'a@1']);
    expect(fired).toEqual([]);
  });

  it('carries policy, key, route and the fraction used', async () => {
    const { limiter, fired } = setup({
      p: { algorithm: 'token-bucket', rate: 10, burst: 10, lease: 'exact' },
    });
    await limiter.consume([{ policy: 'p', key: 'k', cost: 9, route: 'POST /upload' }]);
    expect(fired).toEqual([
      {
        policy: 'p',
        key: 'k',
        route: 'POST /upload',
        threshold: 0.8,
        fraction: 0.9,
        remaining: 1,
        limit: 10,
      },
      {
        policy: 'p',
        key: 'k',
        route: 'POST /upload',
        threshold: 0.9,
        fraction: 0.9,
        remaining: 1,
        limit: 10,
      },
    ]);
  });

  it('re-arms only below threshold minus the margin, so a client hovering at 80 % fires once', async () => {
    const { limiter, take, advance } = setup({
      p: { algorithm: 'token-bucket', rate: 100, burst: 100, lease: 'exact' },
    });
    await limiter.consume('p', 'k', 80);
    expect(take()).toEqual(['k@0.8']);
    // Hover between 74 % and 80 % used: one token refills every 10 ms.
    for (let i = 0; i < 50; i++) {
      advance(50); // +5 tokens: 75 % used
      await limiter.consume('p', 'k', 5); // back to 80 %
    }
    expect(take(), 'never below 75 %: no new window').toEqual([]);
    advance(70); // +7 tokens
    await limiter.consume('p', 'k', 1); // 74 % used: below 80 % - 5 %
    expect(take()).toEqual([]);
    await limiter.consume('p', 'k', 6); // 80 %
    expect(take(), 're-armed at 74 %, fires again at 80 %').toEqual(['k@0.8']);
  });

  it('works on leased policies, where remaining is the local estimate of the shared bucket', async () => {
    const { limiter, take } = setup({ p: { algorithm: 'token-bucket', rate: 100, burst: 100 } });
    const firedAt: string[] = [];
    for (let i = 1; i <= 110; i++) {
      await limiter.consume('p', 'k');
      await settle();
      firedAt.push(...take().map((f) => `${i}:${f}`));
    }
    expect(firedAt.slice(0, 2)).toEqual(['80:k@0.8', '90:k@0.9']);
    // The last lease reaches ahead of the refill, and the core's `remaining` counts tokens that do
    // not exist yet as spent: it reads 0 a couple of decisions early, so 100 % fires just before 100.
    expect(firedAt.slice(2).map((f) => f.split(':')[1])).toEqual(['k@1']);
    const at = Number(firedAt[2]?.split(':')[0]);
    expect(at).toBeGreaterThan(90);
    expect(at).toBeLessThanOrEqual(100);
  });

  it('ignores a cost that can never pass: it says nothing about usage', async () => {
    const { limiter, take } = setup({
      p: { algorithm: 'token-bucket', rate: 10, burst: 10, lease: 'exact' },
    });
    await limiter.consume('p', 'k', 11);
    expect(take()).toEqual([]);
  });

  it('rejects bad options naming the field', () => {
    const onThreshold = () => {};
    expect(() => quotaAlerts({} as never)).toThrow(/`onThreshold`/);
    expect(() => quotaAlerts({ onThreshold, thresholds: [] })).toThrow(/`thresholds`/);
    expect(() => quotaAlerts({ onThreshold, thresholds: [0.5, 1.5] })).toThrow(/`thresholds\[1\]`/);
    expect(() => quotaAlerts({ onThreshold, rearmMargin: -0.1 })).toThrow(/`rearmMargin`/);
    expect(() => quotaAlerts({ onThreshold, maxKeys: 0 })).toThrow(/`maxKeys`/);
  });
});

describe('nextFired', () => {
  const t = [0.8, 0.9, 1];
  it.each([
    { fired: 0b000, used: 0.5, next: 0b000, why: 'below every threshold' },
    { fired: 0b000, used: 0.85, next: 0b001, why: 'reaches 80 %' },
    { fired: 0b000, used: 1, next: 0b111, why: 'a jump fires every threshold passed' },
    { fired: 0b111, used: 0.87, next: 0b011, why: 're-arms 100 % (below 95 %), keeps 90 % and 80 %' },
    { fired: 0b111, used: 0.84, next: 0b001, why: 're-arms 100 % and 90 % (below 85 %), keeps 80 %' },
    { fired: 0b001, used: 0.76, next: 0b001, why: 'inside the margin: stays fired' },
    { fired: 0b001, used: 0.7499, next: 0b000, why: 'below 75 %: re-armed' },
  ])('$why', ({ fired, used, next }) => {
    expect(nextFired(fired, used, t, 0.05)).toBe(next);
  });
});
