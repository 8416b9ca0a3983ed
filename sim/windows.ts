/**
 * Worst cases over every window of a run, in one pass each. A window is any interval of time; only
 * intervals that start and end at an admission matter, so the maxima are taken over those.
 */

/** Admitted tokens of one key, in time order. */
export interface Admissions {
  readonly times: number[];
  readonly costs: number[];
}

export function emptyAdmissions(): Admissions {
  return { times: [], costs: [] };
}

/**
 * The largest `admitted(window) − (capacity + ratePerMs · length)` over all windows: how far the
 * admissions rose above a token-bucket envelope. ≤ 0 means they never did; -Infinity when empty.
 *
 * For a window from admission i to admission j that is `(P[j+1] − r·t[j]) − (P[i] − r·t[i]) − capacity`
 * with P the prefix sums, so keeping the smallest `P[i] − r·t[i]` seen so far suffices.
 */
export function worstEnvelopeExcess(a: Admissions, capacity: number, ratePerMs: number): number {
  let prefix = 0;
  let lowestStart = Number.POSITIVE_INFINITY;
  let worst = Number.NEGATIVE_INFINITY;
  for (let j = 0; j < a.times.length; j++) {
    const t = a.times[j]!;
    lowestStart = Math.min(lowestStart, prefix - ratePerMs * t);
    prefix += a.costs[j]!;
    worst = Math.max(worst, prefix - ratePerMs * t - lowestStart - capacity);
  }
  return worst;
}

/**
 * Over all windows, the most the cluster admitted beyond what the exact reference admitted in the
 * same window (`over`), and the most it fell short of it (`under`), in tokens. Both are ≥ 0.
 * Admissions at the same instant are always in a window together.
 */
export function worstGaps(cluster: Admissions, exact: Admissions): { over: number; under: number } {
  let i = 0;
  let j = 0;
  let diff = 0; // cluster − exact, cumulative
  let lowest = 0;
  let highest = 0;
  let over = 0;
  let under = 0;
  while (i < cluster.times.length || j < exact.times.length) {
    const t = Math.min(
      cluster.times[i] ?? Number.POSITIVE_INFINITY,
      exact.times[j] ?? Number.POSITIVE_INFINITY,
    );
    while (i < cluster.times.length && cluster.times[i] === t) diff += cluster.costs[i++]!;
    while (j < exact.times.length && exact.times[j] === t) diff -= exact.costs[j++]!;
    over = Math.max(over, diff - lowest);
    under = Math.max(under, highest - diff);
    lowest = Math.min(lowest, diff);
    highest = Math.max(highest, diff);
  }
  return { over, under };
}
