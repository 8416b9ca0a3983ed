/**
 * Worst cases over every window of a run, kept online in O(1) memory per key, so a replayed log of
 * any length costs memory per key, not per request. A window is any interval of time; only
 * intervals that start and end at an admission matter, so the maxima are taken over those.
 * Admissions must be added in time order (virtual time only moves forward).
 */

/**
 * The largest `admitted(window) − (capacity + ratePerMs · length)` over all windows: how far the
 * admissions rose above a token-bucket envelope. ≤ 0 means they never did; -Infinity when empty.
 *
 * For a window from admission i to admission j that is `(P[j+1] − r·t[j]) − (P[i] − r·t[i]) − capacity`
 * with P the prefix sums, so keeping the smallest `P[i] − r·t[i]` seen so far suffices.
 */
export class EnvelopeExcess {
  #prefix = 0;
  #lowestStart = Number.POSITIVE_INFINITY;
  worst = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly capacity: number,
    private readonly ratePerMs: number,
  ) {}

  add(t: number, cost: number): void {
    this.#lowestStart = Math.min(this.#lowestStart, this.#prefix - this.ratePerMs * t);
    this.#prefix += cost;
    this.worst = Math.max(this.worst, this.#prefix - this.ratePerMs * t - this.#lowestStart - this.capacity);
  }
}

/**
 * Over all windows, the most the cluster admitted beyond what the exact reference admitted in the
 * same window (`over`), and the most it fell short of it (`under`), in tokens. Both are ≥ 0.
 * Admissions at the same instant are always in a window together.
 */
export class Gaps {
  #diff = 0; // cluster − exact, cumulative
  #lowest = 0;
  #highest = 0;
  #over = 0;
  #under = 0;
  #last = Number.NaN;

  cluster(t: number, cost: number): void {
    this.#at(t);
    this.#diff += cost;
  }

  exact(t: number, cost: number): void {
    this.#at(t);
    this.#diff -= cost;
  }

  /** The worst gaps so far (every admission up to now included). */
  get worst(): { over: number; under: number } {
    return {
      over: Math.max(this.#over, this.#diff - this.#lowest),
      under: Math.max(this.#under, this.#highest - this.#diff),
    };
  }

  /** A new instant: the previous one is complete, so its cumulative difference is settled. */
  #at(t: number): void {
    if (t === this.#last) return;
    if (!Number.isNaN(this.#last)) {
      const { over, under } = this.worst;
      this.#over = over;
      this.#under = under;
      this.#lowest = Math.min(this.#lowest, this.#diff);
      this.#highest = Math.max(this.#highest, this.#diff);
    }
    this.#last = t;
  }
}
