import { describe, expect, it } from 'vitest';
import { decay, demandPerMs, noteDemand } from '../../src/demand.js';

/** The distance between `a` and `b` in units in the last place of `b`. */
function ulps(a: number, b: number): number {
  return Math.abs(a - b) / 2 ** (Math.floor(Math.log2(b)) - 52);
}

describe('demand decay', () => {
  it('is e^-t/1s within 1 ulp of Math.exp, series and call alike', () => {
    let worst = 0;
    // Every 1/16 µs over the series' range, then whole and odd ms beyond it.
    for (let i = 0; i <= 1_000_000; i++) {
      const ms = (i * 62.5) / 1_000_000;
      worst = Math.max(worst, ulps(decay(ms), Math.exp(-ms / 1000)));
    }
    for (let ms = 60; ms < 20_000; ms += 0.37) worst = Math.max(worst, ulps(decay(ms), Math.exp(-ms / 1000)));
    expect(worst, 'ulps from Math.exp').toBeLessThanOrEqual(1);
    expect(decay(0), 'no time passed: no decay').toBe(1);
  });

  it('decays what was noted with a time constant of one second', () => {
    const d = { demandSum: 0, demandAt: 0 };
    noteDemand(d, 0, 10);
    noteDemand(d, 10, 10);
    expect(d.demandSum).toBeCloseTo(10 * Math.exp(-0.01) + 10, 12);
    expect(demandPerMs(d, 1010)).toBeCloseTo(((10 * Math.exp(-0.01) + 10) * Math.exp(-1)) / 1000, 15);
    noteDemand(d, 5, 1);
    expect(d.demandAt, 'a note from the past does not move the clock back').toBe(10);
  });
});
