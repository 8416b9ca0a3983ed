import { describe, expect, it } from 'vitest';
import { Limiter, MemoryStore } from '../../src/index.js';
import { countFleet, settle } from '../support/virtualFleet.js';

/** One instance on a virtual clock whose fleet is counted, with a bucket of `burst` tokens. */
async function instance(burst: number) {
  let t = 1_000_000;
  const clock = { now: () => t, advance: (ms: number) => (t += ms) };
  const store = new MemoryStore({ now: clock.now });
  const limiter = new Limiter({
    store,
    // A bucket that refills slowly: the level moves mostly with what is taken.
    policies: { p: { algorithm: 'token-bucket', rate: 100, period: '1d', burst } },
    now: clock.now,
    sweepIntervalMs: 0,
  });
  await countFleet([limiter], clock.advance);
  return { clock, limiter, store };
}

/** Seconds after which the usage of 5 requests under the allowance reached the store, sweeping every second. */
async function secondsUntilReported(burst: number): Promise<number> {
  const { clock, limiter } = await instance(burst);
  for (let i = 0; i < 6; i++) expect((await limiter.consume('p', 'k')).allowed).toBe(true);
  await settle();
  const reported = limiter.stats().tokensReported;
  for (let s = 1; s <= 300; s++) {
    clock.advance(1000);
    limiter.sweep();
    await settle();
    if (limiter.stats().tokensReported > reported) {
      await limiter.close();
      return s;
    }
  }
  throw new Error('not reported within 300 s');
}

describe('usage under an allowance, reported by the sweep', () => {
  it('a noticeable share of the limit is reported within 10 lease times (20 s)', async () => {
    // 5 of 100 tokens: the store's view of the key lags by 5 % of its limit.
    expect(await secondsUntilReported(100)).toBeLessThanOrEqual(20);
  });

  it('a few tokens of a key far from its limit wait 60 lease times (2 min): on a long tail each report is a store call', async () => {
    expect(await secondsUntilReported(1_000_000)).toBeGreaterThan(100);
    expect(await secondsUntilReported(1_000_000)).toBeLessThanOrEqual(120);
  });
});
