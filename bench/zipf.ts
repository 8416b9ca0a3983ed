/**
 * Deterministic key streams: the same sequence for every contestant, so they see identical traffic.
 */

/** mulberry32: a tiny seeded PRNG, good enough to shuffle benchmark traffic reproducibly. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export const SINGLE_KEY = '1 key';

/** A stream length that is a power of two, so the drivers wrap around with a mask. */
export const STREAM_LENGTH = 1 << 16;

/**
 * `STREAM_LENGTH` keys drawn from `n` keys with Zipf exponent `s` (rank r has weight 1 / r^s):
 * a few hot API keys and a long tail, as gateways see.
 */
export function zipfKeys(n: number, { s = 1, seed = 42, prefix = 'client-' } = {}): string[] {
  const cdf = new Float64Array(n);
  let total = 0;
  for (let r = 1; r <= n; r++) {
    total += 1 / r ** s;
    cdf[r - 1] = total;
  }
  const names = Array.from({ length: n }, (_, i) => `${prefix}${i + 1}`);
  const random = prng(seed);
  const out = new Array<string>(STREAM_LENGTH);
  for (let i = 0; i < STREAM_LENGTH; i++) {
    const u = random() * total;
    let lo = 0;
    let hi = n - 1;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((cdf[mid] as number) < u) lo = mid + 1;
      else hi = mid;
    }
    out[i] = names[lo] as string;
  }
  return out;
}

export function singleKey(key = 'client-1'): string[] {
  return new Array<string>(STREAM_LENGTH).fill(key);
}

export interface KeySet {
  readonly name: string;
  readonly stream: readonly string[];
  /** Every distinct key in the stream, for warming up all of them. */
  readonly distinct: readonly string[];
}

export function keySets(zipfSize: number): KeySet[] {
  const zipf = zipfKeys(zipfSize);
  return [
    { name: SINGLE_KEY, stream: singleKey(), distinct: ['client-1'] },
    { name: `${zipfSize / 1000}k Zipf keys`, stream: zipf, distinct: [...new Set(zipf)] },
  ];
}
