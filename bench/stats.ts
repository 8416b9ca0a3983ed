/** Summary statistics for benchmark rounds: medians with a spread, never a single lucky run. */

export function median(values: readonly number[]): number {
  return quantile(values, 0.5);
}

/** Linear-interpolated quantile (q in [0, 1]) of unsorted values; NaN for none. */
export function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return quantileSorted(sorted, q);
}

export function quantileSorted(sorted: ArrayLike<number>, q: number): number {
  if (sorted.length === 0) return Number.NaN;
  const pos = (sorted.length - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  const a = sorted[lo] as number;
  const b = sorted[hi] as number;
  return a + (b - a) * (pos - lo);
}

export function mean(values: readonly number[]): number {
  let sum = 0;
  for (const v of values) sum += v;
  return sum / values.length;
}

/** Standard error of the mean; 0 for fewer than two values. */
export function standardError(values: readonly number[]): number {
  if (values.length < 2) return 0;
  const m = mean(values);
  let sq = 0;
  for (const v of values) sq += (v - m) ** 2;
  return Math.sqrt(sq / (values.length - 1)) / Math.sqrt(values.length);
}

/** Median and standard error of a set of rounds, the error also as a fraction of the median. */
export interface Summary {
  readonly median: number;
  readonly se: number;
  readonly rounds: number;
}

export function summarize(values: readonly number[]): Summary {
  return { median: median(values), se: standardError(values), rounds: values.length };
}
