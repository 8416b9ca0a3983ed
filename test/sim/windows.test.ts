import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type Admissions, worstEnvelopeExcess, worstGaps } from '../../sim/windows.js';

/** Sorted admissions at integer ms (so equal times occur) with small costs. */
const admissions = fc
  .array(fc.record({ t: fc.integer({ min: 0, max: 200 }), cost: fc.integer({ min: 1, max: 5 }) }), {
    maxLength: 40,
  })
  .map((xs): Admissions => {
    const sorted = [...xs].sort((a, b) => a.t - b.t);
    return { times: sorted.map((x) => x.t), costs: sorted.map((x) => x.cost) };
  });

/** Sum of costs with from <= t <= to. */
function within(a: Admissions, from: number, to: number): number {
  let sum = 0;
  a.times.forEach((t, i) => {
    if (t >= from && t <= to) sum += a.costs[i]!;
  });
  return sum;
}

describe('window metrics', () => {
  it('worstEnvelopeExcess equals the brute-force maximum over all windows', () => {
    fc.assert(
      fc.property(
        admissions,
        fc.integer({ min: 0, max: 20 }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        (a, cap, rate) => {
          let brute = Number.NEGATIVE_INFINITY;
          for (const from of a.times) {
            for (const to of a.times) {
              if (to >= from) brute = Math.max(brute, within(a, from, to) - (cap + rate * (to - from)));
            }
          }
          expect(worstEnvelopeExcess(a, cap, rate)).toBeCloseTo(brute, 9);
        },
      ),
    );
  });

  it('worstGaps equals the brute-force most-ahead and most-behind windows', () => {
    fc.assert(
      fc.property(admissions, admissions, (cluster, exact) => {
        const times = [...new Set([...cluster.times, ...exact.times])];
        let over = 0;
        let under = 0;
        for (const from of times) {
          for (const to of times) {
            if (to < from) continue;
            const gap = within(cluster, from, to) - within(exact, from, to);
            over = Math.max(over, gap);
            under = Math.max(under, -gap);
          }
        }
        expect(worstGaps(cluster, exact)).toEqual({ over, under });
      }),
    );
  });
});
