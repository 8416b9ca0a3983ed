/**
 * A window policy whose `window` changes while its keys hold counts: a plans file reloaded with a
 * longer window, or two limiters (a rolling deploy, two express-rate-limit middlewares) giving one
 * policy name different windows on one store. Found in the operator trial: a stored window index
 * of a 1-minute window, read as one of a 1-hour window, is a window 59 × as far from the epoch, so
 * the key "stayed in the stored window" (as after a clock that went backwards) and refused with
 * `retryAfterMs` 105974579920630 (3360 years), on Redis and in memory alike. A stored window more
 * than one window ahead is now foreign: its counts count in the window of now, so nothing they
 * counted is forgotten and nothing waits longer than the new window.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { Limiter, type PolicyConfig } from '../../src/index.js';
import { closeAllClients } from '../support/clients.js';
import { FRESH_STORES } from '../support/stores.js';

afterAll(closeAllClients);

const HOUR = 3_600_000;
/** 30 s into a minute, on a clock that stands still: the minute's window cannot end (and its key expire) mid-test. */
const now = () => 1_700_000_010_000;

const shapes: Record<string, (window: '1m' | '1h') => PolicyConfig> = {
  'fixed window': (window) => ({ algorithm: 'fixed-window', limit: 10, window, lease: 'exact' }),
  'fixed window, first hit': (window) => ({
    algorithm: 'fixed-window',
    limit: 10,
    window,
    anchor: 'first-hit',
    lease: 'exact',
  }),
  'sliding window': (window) => ({ algorithm: 'sliding-window', limit: 10, window, lease: 'exact' }),
};

describe.each(Object.keys(FRESH_STORES))('on %s', (kind) => {
  it.each(Object.keys(shapes))(
    '%s: 1m -> 1h keeps the counts and waits at most two new windows',
    async (shape) => {
      const store = await FRESH_STORES[kind]!('window-change', now);
      const policy = shapes[shape]!;
      const limiter = new Limiter({ store, policies: { p: policy('1m') }, sweepIntervalMs: 0, now });
      for (let i = 0; i < 6; i++)
        expect((await limiter.consume('p', 'k')).allowed, `request ${i} of 10`).toBe(true);
      limiter.setPolicies({ p: policy('1h') });
      const allowed: boolean[] = [];
      let last = await limiter.consume('p', 'k');
      allowed.push(last.allowed);
      while (last.allowed && allowed.length < 20) {
        last = await limiter.consume('p', 'k');
        allowed.push(last.allowed);
      }
      await limiter.close();
      await store.close();
      expect(allowed.filter(Boolean).length, 'the 6 counted before stay counted: 4 left of 10').toBe(4);
      // A sliding window's count still weighs in the next window: two windows at most.
      expect(last.retryAfterMs, 'a refusal waits at most two new windows').toBeLessThanOrEqual(2 * HOUR);
      expect(last.resetMs, 'every count is gone within two new windows').toBeLessThanOrEqual(2 * HOUR);
    },
  );
});

describe.each(Object.keys(FRESH_STORES))('a quantised sliding log on %s', (kind) => {
  it('whose quantum grows (1s -> 10s) starts afresh, waiting at most its window', async () => {
    const store = await FRESH_STORES[kind]!('quantum-change');
    const log = (quantum: '1s' | '10s'): PolicyConfig => ({
      algorithm: 'sliding-log',
      limit: 10,
      window: '1h',
      quantum,
    });
    const limiter = new Limiter({ store, policies: { p: log('1s') }, sweepIntervalMs: 0 });
    for (let i = 0; i < 6; i++)
      expect((await limiter.consume('p', 'k')).allowed, `request ${i} of 10`).toBe(true);
    limiter.setPolicies({ p: log('10s') });
    const decisions = [];
    for (let i = 0; i < 11; i++) decisions.push(await limiter.consume('p', 'k'));
    await limiter.close();
    await store.close();
    // Buckets of a second cannot be re-read as buckets of ten: the log forgets them, as a coarser
    // quantum's buckets read at a finer one have left the window.
    expect(
      decisions.map((d) => d.allowed),
      'a fresh log: 10 of 11',
    ).toEqual([...Array(10).fill(true), false]);
    const last = decisions.at(-1)!;
    expect(last.retryAfterMs, 'a refusal waits at most the window and a quantum').toBeLessThanOrEqual(
      HOUR + 10_000,
    );
    expect(last.resetMs, 'the log empties within the window and a quantum').toBeLessThanOrEqual(
      HOUR + 10_000,
    );
  });
});
