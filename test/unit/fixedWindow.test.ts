import { describe, expect, it } from 'vitest';
import {
  acquire,
  MONTH,
  release,
  windowEnd,
  windowIndex,
  windowStart,
} from '../../src/algorithms/fixedWindow.js';

const MIN = 60_000;
const req = (want: number, min = want, limit = 100, windowMs = MIN) => ({
  limit,
  windowMs,
  want,
  min,
  ahead: true,
});

describe('fixed window: calendar months in UTC', () => {
  it.each([
    ['mid-January 2024', Date.UTC(2024, 0, 15, 12), Date.UTC(2024, 0, 1), Date.UTC(2024, 1, 1)],
    ['last ms of January', Date.UTC(2024, 1, 1) - 1, Date.UTC(2024, 0, 1), Date.UTC(2024, 1, 1)],
    ['leap day 2024', Date.UTC(2024, 1, 29, 23, 59), Date.UTC(2024, 1, 1), Date.UTC(2024, 2, 1)],
    ['February 2023 (no leap day)', Date.UTC(2023, 1, 28), Date.UTC(2023, 1, 1), Date.UTC(2023, 2, 1)],
    [
      'December rolls into the next year',
      Date.UTC(2023, 11, 31, 23),
      Date.UTC(2023, 11, 1),
      Date.UTC(2024, 0, 1),
    ],
    ['the epoch', 0, 0, Date.UTC(1970, 1, 1)],
  ])('%s', (_, now, start, end) => {
    const index = windowIndex(now, MONTH);
    expect(windowStart(index, MONTH)).toBe(start);
    expect(windowEnd(index, MONTH)).toBe(end);
  });

  it('aligns fixed durations to the epoch: a day runs from UTC midnight', () => {
    const now = Date.UTC(2024, 4, 10, 15, 30);
    const index = windowIndex(now, 86_400_000);
    expect(windowStart(index, 86_400_000)).toBe(Date.UTC(2024, 4, 10));
    expect(windowEnd(index, 86_400_000)).toBe(Date.UTC(2024, 4, 11));
  });
});

describe('fixed window counter', () => {
  it.each([
    ['absent key: grants the whole want', undefined, 0, req(10), 10, 90],
    ['grants want when it fits', { window: 0, count: 50 }, 1000, req(10), 10, 40],
    ['grants what is left when at least min fits', { window: 0, count: 95 }, 1000, req(10, 2), 5, 0],
    ['grants nothing below min', { window: 0, count: 99 }, 1000, req(10, 2), 0, 1],
    ['a new window starts from zero', { window: 0, count: 100 }, MIN, req(10), 10, 90],
    ['a clock that went back stays in the stored window', { window: 1, count: 95 }, MIN - 1, req(10), 0, 5],
  ])('%s', (_, state, now, request, granted, remaining) => {
    const t = acquire(state, now, request);
    expect(t.result.granted).toBe(granted);
    expect(t.result.remaining).toBe(remaining);
  });

  it('writes nothing on a refusal: a refused request is not counted', () => {
    const state = { window: 0, count: 100 };
    const t = acquire(state, 30_000, req(1));
    expect(t.state, 'same state object: MemoryStore keeps it and its expiry').toBe(state);
    expect(t.result).toMatchObject({ granted: 0, retryMs: 30_000, msLeft: 30_000, resetMs: 30_000 });
  });

  it('expires the key with its window', () => {
    const t = acquire(undefined, 45_000, req(1));
    expect(t.ttlMs).toBe(15_000);
    expect(t.result.msLeft).toBe(15_000);
  });

  it('takes unused tokens back into the same window only', () => {
    const state = { window: 3, count: 40 };
    expect(release(state, 3 * MIN, { windowMs: MIN, window: 3, tokens: 15 }).state).toEqual({
      window: 3,
      count: 25,
    });
    expect(release(state, 3 * MIN, { windowMs: MIN, window: 2, tokens: 15 }).state, 'other window').toBe(
      state,
    );
    expect(release(state, 3 * MIN, { windowMs: MIN, window: 3, tokens: 99 }).state?.count, 'floor').toBe(0);
    expect(release(undefined, 0, { windowMs: MIN, window: 0, tokens: 5 }).state).toBeUndefined();
  });

  it('admits 2 × limit across a window edge: 100 at the end of a minute, 100 at the start of the next', () => {
    let state: ReturnType<typeof acquire>['state'];
    let admitted = 0;
    for (let i = 0; i < 100; i++) {
      const t = acquire(state, 59_000 + i, req(1));
      state = t.state;
      admitted += t.result.granted;
    }
    for (let i = 0; i < 100; i++) {
      const t = acquire(state, 60_000 + i, req(1));
      state = t.state;
      admitted += t.result.granted;
    }
    expect(admitted, '200 within 1.1 s, each minute within its limit').toBe(200);
    expect(acquire(state, 60_100, req(1)).result.granted).toBe(0);
  });
});

describe('fixed window anchored at the first hit', () => {
  const first = (want: number, windowMs = MIN) => ({ ...req(want, want, 5, windowMs), firstHit: true });
  const t0 = 1_700_000_012_345;

  it('opens a full window at the first grant, off the epoch grid', () => {
    const t = acquire(undefined, t0, first(1));
    expect(t.result.msLeft, 'a whole window from the first hit').toBe(MIN);
    expect(t.ttlMs).toBe(MIN);
    expect(windowStart(t.result.window, MIN)).toBe(t0);
  });

  it('counts in that window until it ends, then opens the next at the next hit', () => {
    let state = acquire(undefined, t0, first(5)).state;
    const refused = acquire(state, t0 + MIN - 1, first(1));
    expect(refused.result.granted).toBe(0);
    expect(refused.result.retryMs, 'retry when the window that opened at the first hit ends').toBe(1);
    const later = acquire(state, t0 + MIN + 500, first(1));
    expect(later.result.granted).toBe(1);
    expect(later.result.msLeft, 'the new window opens at this hit, not at the old end').toBe(MIN);
    state = later.state;
    expect(
      release(state, t0 + MIN + 600, { windowMs: MIN, window: later.result.window, tokens: 1 }).state,
    ).toEqual({ window: later.result.window, count: 0 });
  });

  it('a window opening now lasts exactly its length, whatever the clock (no rounding of its index)', () => {
    for (const windowMs of [86_400_000, 172_800_000, 3_600_000, 5_000]) {
      for (const now of [1_764_581_234_567.891, 1_700_000_000_001, 1e12 + 0.5]) {
        expect(acquire(undefined, now, first(1, windowMs)).result.msLeft, `${windowMs} at ${now}`).toBe(
          windowMs,
        );
      }
    }
  });

  it('later hits see the window end exactly: start + length', () => {
    for (const windowMs of [120_000, 86_400_000, 5_000]) {
      for (const start of [1_764_581_234_567, 1_700_000_000_001, 1_764_590_000_123]) {
        const { state } = acquire(undefined, start, first(1, windowMs));
        for (const later of [0, 1, 999]) {
          const r = acquire(state, start + later, first(1, windowMs)).result;
          expect(r.msLeft, `${windowMs} from ${start}, ${later} ms later`).toBe(windowMs - later);
        }
      }
    }
  });

  it('a clock that went back stays in the stored window', () => {
    const { state } = acquire(undefined, t0, first(5));
    expect(acquire(state, t0 - 10, first(1)).result.granted).toBe(0);
  });
});
