import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SpaceSaving } from '../../src/observe/spaceSaving.js';

/** mulberry32: a small seeded PRNG, so the flood is the same on every run. */
function prng(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Samples ranks 0..n-1 with P(rank r) proportional to 1 / (r + 1)^s. */
function zipf(n: number, s: number, random: () => number): () => number {
  const cdf = new Float64Array(n);
  let sum = 0;
  for (let i = 0; i < n; i++) {
    sum += 1 / (i + 1) ** s;
    cdf[i] = sum;
  }
  return () => {
    const u = random() * sum;
    let lo = 0;
    let hi = n - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (cdf[mid]! < u) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };
}

describe('SpaceSaving', () => {
  it('finds the true top 10 of a Zipf flood over 100k keys with the default 256 counters', () => {
    const keys = 100_000;
    const random = prng(7);
    const sample = zipf(keys, 1, random);
    // Key names unrelated to rank, so nothing but the counts can order them.
    const names = Array.from({ length: keys }, (_, i) => `client-${((i * 48_271) % keys).toString(36)}`);
    const sketch = new SpaceSaving(256, Number.POSITIVE_INFINITY, 0);
    const truth = new Map<string, number>();
    for (let i = 0; i < 500_000; i++) {
      const key = names[sample()]!;
      sketch.offer(key, 1, 0);
      truth.set(key, (truth.get(key) ?? 0) + 1);
    }
    expect(truth.size, 'the flood touches most of the key space').toBeGreaterThan(50_000);
    const trueTop = [...truth].sort((a, b) => b[1] - a[1]).slice(0, 10);
    const top = sketch.top(10, 0);
    expect(top.map((h) => h.key)).toEqual(trueTop.map(([key]) => key));
    for (const h of top) {
      const real = truth.get(h.key)!;
      expect(h.count, `${h.key} upper bound`).toBeGreaterThanOrEqual(real);
      expect(h.count - h.error, `${h.key} lower bound`).toBeLessThanOrEqual(real);
    }
  });

  it('keeps its guarantees on any stream: bounds hold and every key above total/capacity is tracked', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 8 }),
        fc.array(fc.tuple(fc.integer({ min: 0, max: 20 }), fc.integer({ min: 1, max: 5 })), {
          maxLength: 200,
        }),
        (capacity, stream) => {
          const sketch = new SpaceSaving(capacity, Number.POSITIVE_INFINITY, 0);
          const truth = new Map<string, number>();
          let total = 0;
          for (const [k, w] of stream) {
            sketch.offer(`k${k}`, w, 0);
            truth.set(`k${k}`, (truth.get(`k${k}`) ?? 0) + w);
            total += w;
          }
          const all = sketch.top(capacity, 0);
          expect(all.length).toBe(Math.min(capacity, truth.size));
          expect(sketch.total(0)).toBe(total);
          for (const h of all) {
            const real = truth.get(h.key) ?? 0;
            expect(h.count).toBeGreaterThanOrEqual(real);
            expect(h.count - h.error).toBeLessThanOrEqual(real);
            expect(h.error).toBeLessThanOrEqual(total / capacity);
          }
          const tracked = new Set(all.map((h) => h.key));
          for (const [key, real] of truth)
            if (real > total / capacity) expect(tracked.has(key), key).toBe(true);
          for (let i = 1; i < all.length; i++)
            expect(all[i - 1]!.count).toBeGreaterThanOrEqual(all[i]!.count);
        },
      ),
    );
  });

  it('halves every count per half-life, so a new heavy key overtakes an old one', () => {
    const sketch = new SpaceSaving(4, 1000, 0);
    for (let i = 0; i < 100; i++) sketch.offer('old', 1, 0);
    expect(sketch.top(1, 999)[0]).toEqual({ key: 'old', count: 100, error: 0 });
    expect(sketch.top(1, 2500)[0]).toEqual({ key: 'old', count: 25, error: 0 });
    for (let i = 0; i < 30; i++) sketch.offer('new', 1, 2500);
    expect(sketch.top(2, 2500).map((h) => h.key)).toEqual(['new', 'old']);
    expect(sketch.total(2500)).toBe(55);
  });
});
