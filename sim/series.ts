/** Readable bucket widths, in ms. */
const WIDTHS = [100, 250, 500, 1000, 2000, 5000, 10_000, 15_000, 30_000, 60_000, 300_000, 600_000, 3_600_000];
/** About this many points per plot. */
const POINTS = 120;

export const SERIES = ['offered', 'admitted', 'exact', 'storeCalls', 'instances'] as const;
export type SeriesName = (typeof SERIES)[number];

/**
 * Per-bucket sums over virtual time for the plots. A run of known length gets a fixed bucket width
 * giving ~120 points; a replayed log, whose length is known only at its end, starts at 100 ms and
 * doubles the width (merging pairs) whenever it would pass 240 points, so memory stays bounded.
 * `instances` keeps the largest value seen in a bucket instead of a sum.
 */
export class TimeSeries {
  bucketMs: number;
  readonly values: Record<SeriesName, number[]>;
  /** With a known length, the last bucket: what settles after the end is counted in it. */
  readonly #last: number;

  constructor(durationMs: number | undefined) {
    this.bucketMs =
      durationMs === undefined
        ? WIDTHS[0]!
        : (WIDTHS.find((w) => w >= durationMs / POINTS) ?? durationMs / POINTS);
    this.#last =
      durationMs === undefined ? Number.POSITIVE_INFINITY : Math.ceil(durationMs / this.bucketMs) - 1;
    this.values = Object.fromEntries(SERIES.map((name) => [name, []])) as unknown as Record<
      SeriesName,
      number[]
    >;
  }

  add(name: SeriesName, t: number, value: number): void {
    const i = this.#index(t);
    const v = this.values[name];
    v[i] = name === 'instances' ? Math.max(v[i] ?? 0, value) : (v[i] ?? 0) + value;
  }

  /** Every series as dense arrays of equal length (the run's buckets, or up to the last one used). */
  dense(): Record<SeriesName, number[]> {
    const n = Number.isFinite(this.#last)
      ? this.#last + 1
      : Math.max(...SERIES.map((name) => this.values[name].length));
    return Object.fromEntries(
      SERIES.map((name) => [name, Array.from({ length: n }, (_, i) => this.values[name][i] ?? 0)]),
    ) as unknown as Record<SeriesName, number[]>;
  }

  #index(t: number): number {
    if (Number.isFinite(this.#last)) return Math.min(this.#last, Math.floor(t / this.bucketMs));
    let i = Math.floor(t / this.bucketMs);
    while (i >= 2 * POINTS) {
      this.#halve();
      i = Math.floor(t / this.bucketMs);
    }
    return i;
  }

  #halve(): void {
    this.bucketMs *= 2;
    for (const name of SERIES) {
      const old = this.values[name];
      const merged: number[] = [];
      for (let i = 0; i < old.length; i += 2) {
        const a = old[i] ?? 0;
        const b = old[i + 1] ?? 0;
        merged.push(name === 'instances' ? Math.max(a, b) : a + b);
      }
      this.values[name] = merged;
    }
  }
}
