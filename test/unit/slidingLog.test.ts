import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { acquire, release, type SlidingLogState } from '../../src/algorithms/slidingLog.js';
import * as quantised from '../../src/algorithms/slidingLogQuantised.js';

const W = 1000;
const req = (id: string, cost = 1, limit = 3) => ({ limit, windowMs: W, cost, id });

function fill(times: number[], limit = 3): SlidingLogState | undefined {
  let state: SlidingLogState | undefined;
  times.forEach((t, i) => {
    state = acquire(state, t, req(`r${i}`, 1, limit)).state;
  });
  return state;
}

describe('sliding log', () => {
  it('admits up to the limit, then refuses without recording the request', () => {
    const state = fill([0, 100, 200]);
    const t = acquire(state, 300, req('x'));
    expect(t.result).toEqual({ allowed: false, count: 3, retryMs: 700, resetMs: 900 });
    expect(t.state?.entries).toHaveLength(3);
  });

  it('drops an entry exactly one window after it: the window is (now - window, now]', () => {
    const state = fill([0, 100, 200]);
    expect(acquire(state, 999, req('x')).result.allowed).toBe(false);
    expect(acquire(state, 1000, req('x')).result).toMatchObject({ allowed: true, count: 3 });
  });

  it('names the entry that must leave for a multi-unit cost to fit', () => {
    const state = fill([0, 100, 200], 5);
    // 3 held, limit 5, cost 4: two entries must leave; the second leaves at 100 + 1000.
    expect(acquire(state, 300, req('x', 4, 5)).result.retryMs).toBe(800);
  });

  it('records each unit as its own member, unique within one millisecond', () => {
    let state = acquire(undefined, 5, req('a', 2)).state;
    state = acquire(state, 5, req('b', 1)).state;
    expect(state?.entries.map((e) => e.member)).toEqual(['a:1', 'a:2', 'b:1']);
  });

  it('removes exactly the entries of a refunded request', () => {
    let state = acquire(undefined, 0, req('a', 2)).state;
    state = acquire(state, 1, req('b', 1)).state;
    expect(release(state, 2, { windowMs: W, cost: 2, id: 'a' }).state?.entries.map((e) => e.member)).toEqual([
      'b:1',
    ]);
  });

  it('never holds more than the limit in any window of its length', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 10 }),
        fc.array(fc.record({ gap: fc.integer({ min: 0, max: 400 }), cost: fc.integer({ min: 1, max: 3 }) }), {
          maxLength: 200,
        }),
        (limit, arrivals) => {
          let state: SlidingLogState | undefined;
          let t = 0;
          const admitted: { t: number; cost: number }[] = [];
          arrivals.forEach((a, i) => {
            t += a.gap;
            const r = acquire(state, t, { limit, windowMs: W, cost: a.cost, id: `r${i}` });
            state = r.state;
            if (r.result.allowed) admitted.push({ t, cost: a.cost });
          });
          for (const end of admitted) {
            const inWindow = admitted.filter((a) => a.t > end.t - W && a.t <= end.t);
            expect(inWindow.reduce((s, a) => s + a.cost, 0)).toBeLessThanOrEqual(limit);
          }
        },
      ),
    );
  });
});

describe('quantised sliding log', () => {
  const q = (cost = 1, limit = 3) => ({ limit, windowMs: W, quantumMs: 100, cost });

  it('counts per bucket and keeps a bucket while any part of it is in the window', () => {
    let state = quantised.acquire(undefined, 150, q()).state;
    state = quantised.acquire(state, 199, q()).state;
    expect(state?.buckets).toEqual(new Map([[1, 2]]));
    // Bucket 1 covers [100, 200): it counts until 200 + 1000, not 150 + 1000.
    expect(quantised.acquire(state, 1199, q(2)).result.allowed).toBe(false);
    expect(quantised.acquire(state, 1200, q(3)).result).toMatchObject({ allowed: true, count: 3 });
  });

  it('refuses without recording and says when enough buckets have left', () => {
    let state = quantised.acquire(undefined, 0, q(2)).state;
    state = quantised.acquire(state, 250, q(1)).state;
    const t = quantised.acquire(state, 300, q(2));
    expect(t.result).toMatchObject({ allowed: false, count: 3, bucket: -1, retryMs: 800, resetMs: 1000 });
    expect(t.state).toBe(state);
  });

  it('forgets everything after a long idle gap without walking every bucket', () => {
    const state = quantised.acquire(undefined, 0, q(3)).state;
    expect(quantised.acquire(state, 1e12, q(3)).result).toMatchObject({ allowed: true, count: 3 });
  });

  it('counts at least what the exact log counts and at most what a log one quantum longer counts', () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ gap: fc.integer({ min: 0, max: 300 }), cost: fc.integer({ min: 1, max: 3 }) }), {
          maxLength: 150,
        }),
        (arrivals) => {
          let state: quantised.QuantisedLogState | undefined;
          let t = 0;
          const admitted: { t: number; cost: number }[] = [];
          const within = (now: number, w: number) =>
            admitted.filter((a) => a.t > now - w).reduce((s, a) => s + a.cost, 0);
          for (const a of arrivals) {
            t += a.gap;
            const r = quantised.acquire(state, t, q(a.cost, 10));
            state = r.state;
            const before = r.result.allowed ? r.result.count - a.cost : r.result.count;
            expect(before).toBeGreaterThanOrEqual(within(t, W));
            expect(before).toBeLessThanOrEqual(within(t, W + 100));
            if (r.result.allowed) admitted.push({ t, cost: a.cost });
          }
        },
      ),
    );
  });
});
