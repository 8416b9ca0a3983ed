/**
 * Space-Saving heavy hitters (Metwally, Agrawal, El Abbadi 2005) over a bounded number of counters,
 * with exponential decay so the list follows who is heavy *now*.
 *
 * The sketch keeps `capacity` (key, count, error) counters in a min-heap on count. A key already
 * tracked adds its weight; an untracked key takes over the smallest counter, inheriting its count
 * as `error`. What that guarantees, for the (decayed) stream seen so far with total weight W:
 * - `count` never underestimates a key's true weight, and `count - error` never overestimates it;
 * - every error is at most W / capacity, so every key heavier than W / capacity is tracked.
 * On a skewed (Zipf-like) stream the errors of the heavy keys are far smaller than that bound.
 *
 * Decay multiplies every count, every error and W by the same factor (one half per `halfLifeMs`),
 * which keeps all three guarantees, relative to a stream whose older items weigh less, and keeps
 * the heap order. It is applied lazily when the sketch is touched, from the `now` the caller passes:
 * the module reads no clock and does no I/O.
 */

export interface HeavyHitter {
  key: string;
  /** Upper bound of the key's (decayed) weight. */
  count: number;
  /** How much of `count` may belong to keys this counter tracked before; `count - error` is a lower bound. */
  error: number;
}

export class SpaceSaving {
  readonly capacity: number;
  readonly halfLifeMs: number;
  readonly #keys: string[] = [];
  readonly #counts: number[] = [];
  readonly #errors: number[] = [];
  readonly #index = new Map<string, number>();
  #total = 0;
  #decayedAt: number;

  /** `halfLifeMs` may be Infinity (no decay); `now` starts the decay clock. */
  constructor(capacity: number, halfLifeMs: number, now: number) {
    this.capacity = capacity;
    this.halfLifeMs = halfLifeMs;
    this.#decayedAt = now;
  }

  /** Total (decayed) weight offered so far. */
  total(now: number): number {
    this.#decay(now);
    return this.#total;
  }

  offer(key: string, weight: number, now: number): void {
    this.#decay(now);
    this.#total += weight;
    const at = this.#index.get(key);
    if (at !== undefined) {
      this.#counts[at]! += weight;
      this.#down(at);
      return;
    }
    if (this.#keys.length < this.capacity) {
      const i = this.#keys.length;
      this.#keys.push(key);
      this.#counts.push(weight);
      this.#errors.push(0);
      this.#index.set(key, i);
      this.#up(i);
      return;
    }
    // Replace the smallest counter: the newcomer may have been counted under it all along.
    this.#index.delete(this.#keys[0]!);
    const floor = this.#counts[0]!;
    this.#keys[0] = key;
    this.#errors[0] = floor;
    this.#counts[0] = floor + weight;
    this.#index.set(key, 0);
    this.#down(0);
  }

  /** The `n` heaviest keys, heaviest first. */
  top(n: number, now: number): HeavyHitter[] {
    this.#decay(now);
    const all: HeavyHitter[] = this.#keys.map((key, i) => ({
      key,
      count: this.#counts[i]!,
      error: this.#errors[i]!,
    }));
    all.sort((a, b) => b.count - a.count || a.error - b.error);
    return all.slice(0, n);
  }

  #decay(now: number): void {
    const halvings = Math.floor((now - this.#decayedAt) / this.halfLifeMs);
    if (!(halvings > 0)) return; // an infinite half-life gives 0 halvings
    this.#decayedAt += halvings * this.halfLifeMs;
    const factor = 2 ** -halvings;
    this.#total *= factor;
    for (let i = 0; i < this.#keys.length; i++) {
      this.#counts[i]! *= factor;
      this.#errors[i]! *= factor;
    }
  }

  #up(i: number): void {
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (this.#counts[parent]! <= this.#counts[i]!) return;
      this.#swap(i, parent);
      i = parent;
    }
  }

  #down(i: number): void {
    const n = this.#keys.length;
    for (;;) {
      const left = 2 * i + 1;
      if (left >= n) return;
      const right = left + 1;
      const child = right < n && this.#counts[right]! < this.#counts[left]! ? right : left;
      if (this.#counts[i]! <= this.#counts[child]!) return;
      this.#swap(i, child);
      i = child;
    }
  }

  #swap(a: number, b: number): void {
    const keys = this.#keys;
    const counts = this.#counts;
    const errors = this.#errors;
    [keys[a], keys[b]] = [keys[b]!, keys[a]!];
    [counts[a], counts[b]] = [counts[b]!, counts[a]!];
    [errors[a], errors[b]] = [errors[b]!, errors[a]!];
    this.#index.set(keys[a]!, a);
    this.#index.set(keys[b]!, b);
  }
}
