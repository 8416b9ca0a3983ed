import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { EnvelopeExcess, Gaps } from '../../sim/windows.js';

interface Admission {
  t: number;
  cost: number;
}

/** Sorted admissions at integer ms (so equal times occur) with small costs. */
const admissions = fc
  .array(fc.record({ t: fc.integer({ min: 0, max: 200 }), cost: fc.integer({ min: 1, max: 5 }) }), {
    maxLength: 40,
  })
  .map((xs): Admission[] => [...xs].sort((a, b) => a.t - b.t));

/** Sum of costs with from <= t <= to. */
function within(a: readonly Admission[], from: number, to: number): number {
  let sum = 0;
  for (const x of a) if (x.t >= from && x.t <= to) sum += x.cost;
  return sum;
}

describe('window metrics', () => {
  it('EnvelopeExcess equals the brute-force maximum over all windows', () => {
    fc.assert(
      fc.property(
        admissions,
        fc.integer({ min: 0, max: 20 }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        (a, cap, rate) => {
          let brute = Number.NEGATIVE_INFINITY;
          for (const from of a) {
            for (const to of a) {
              if (to.t >= from.t)
                brute = Math.max(brute, within(a, from.t, to.t) - (cap + rate * (to.t - from.t)));
            }
          }
          const online = new EnvelopeExcess(cap, rate);
          for (const x of a) online.add(x.t, x.cost);
          expect(online.worst).toBeCloseTo(brute, 9);
        },
      ),
    );
  });

  it('Gaps equals the brute-force most-ahead and most-behind windows, fed in time order', () => {
    fc.assert(
      fc.property(admissions, admissions, (cluster, exact) => {
        const times = [...new Set([...cluster, ...exact].map((x) => x.t))];
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
        // Interleaved as a run records them: by time, either side first at the same instant.
        const events = [
          ...cluster.map((x) => ({ ...x, side: 'cluster' as const })),
          ...exact.map((x) => ({ ...x, side: 'exact' as const })),
        ].sort((a, b) => a.t - b.t);
        const gaps = new Gaps();
        for (const e of events) gaps[e.side](e.t, e.cost);
        expect(gaps.worst).toEqual({ over, under });
      }),
    );
  });
});
