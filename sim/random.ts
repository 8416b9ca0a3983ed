/**
 * Seeded randomness. Every source of chance in a run (arrivals, keys, balancer, latency, scaling)
 * draws from its own stream derived from the scenario seed and a label, so changing one aspect of a
 * scenario does not reshuffle the others, and the same seed always gives the same run.
 */
export type Random = () => number;

/** FNV-1a, 32 bit: stream labels, consistent-hash rings, key hashes. */
export function hash32(text: string, seed = 0x811c9dc5): number {
  let h = seed >>> 0;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  // A final avalanche: FNV alone clusters short strings that differ in their last character.
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  return h >>> 0;
}

/** mulberry32: small, fast, and good enough for simulation (not for cryptography). */
export function mulberry32(seed: number): Random {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function stream(seed: number, label: string): Random {
  return mulberry32(hash32(`${seed}:${label}`));
}

/** Exponentially distributed gap with the given rate (events per unit time). */
export function exponential(random: Random, rate: number): number {
  return -Math.log(1 - random()) / rate;
}

/** Draws indexes with probability proportional to fixed weights (binary search on the cumulative sums). */
export class WeightedPicker {
  readonly #cumulative: Float64Array;

  constructor(weights: readonly number[]) {
    this.#cumulative = new Float64Array(weights.length);
    let sum = 0;
    weights.forEach((w, i) => {
      sum += w;
      this.#cumulative[i] = sum;
    });
  }

  get size(): number {
    return this.#cumulative.length;
  }

  pick(random: Random): number {
    const c = this.#cumulative;
    const target = random() * c[c.length - 1]!;
    let lo = 0;
    let hi = c.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (c[mid]! > target) hi = mid;
      else lo = mid + 1;
    }
    return lo;
  }
}

/** Weights of a Zipf law with exponent `s` over `n` ranks: rank i (from 0) has weight 1 / (i+1)^s. */
export function zipfWeights(n: number, s: number): number[] {
  return Array.from({ length: n }, (_, i) => 1 / (i + 1) ** s);
}
