/**
 * An exponentially decaying estimate of one instance's demand for one key, in tokens per ms.
 * Leases are sized from it: an instance that sees little traffic for a key holds few of its tokens.
 */
export interface Demand {
  /** Decayed sum of costs seen. */
  demandSum: number;
  /** When it was last decayed. */
  demandAt: number;
}

/** Time constant of the decay: demand older than a few seconds stops counting. */
const TAU_MS = 1000;
/**
 * Below this many time constants `decay` sums the Taylor series of e^-x instead of calling
 * `Math.exp` (a call out of optimised code on every decision). The terms after x^9/9! add less
 * than x^10/10! ≈ 2.5e-19 here, far below the rounding of the sum: the result is within 1 ulp of
 * `Math.exp`'s (checked in test/unit/demand.test.ts), itself within 1 ulp of e^-x.
 */
const SERIES_BELOW = 1 / 16;

/** e^(-elapsedMs / TAU_MS), for `elapsedMs` ≥ 0. */
export function decay(elapsedMs: number): number {
  const x = elapsedMs / TAU_MS;
  if (!(x < SERIES_BELOW)) return Math.exp(-x);
  const y = -x;
  // Horner's form of Σ y^k / k! up to k = 9: multiplications only, no division.
  return (
    1 +
    y *
      (1 +
        y *
          (1 / 2 +
            y *
              (1 / 6 +
                y *
                  (1 / 24 +
                    y * (1 / 120 + y * (1 / 720 + y * (1 / 5040 + y * (1 / 40_320 + y * (1 / 362_880)))))))))
  );
}

export function noteDemand(d: Demand, now: number, cost: number): void {
  d.demandSum = d.demandSum * decay(Math.max(0, now - d.demandAt)) + cost;
  d.demandAt = Math.max(d.demandAt, now);
}

export function demandPerMs(d: Demand, now: number): number {
  return (d.demandSum * decay(Math.max(0, now - d.demandAt))) / TAU_MS;
}

/**
 * Slow start: a lease (of tokens or of free slots) doubles from the last one granted, from 1 for a
 * key without history, up to `cap` and to what the demand asks for (`Infinity`: not counted).
 */
export function leaseSize(lastGrant: number, cap: number, demand = Number.POSITIVE_INFINITY): number {
  return Math.min(cap, Math.max(1, lastGrant * 2), demand);
}
