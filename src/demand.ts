/**
 * An exponentially decaying estimate of one instance's demand for one key, in tokens per ms.
 * Leases are sized from it: an instance that sees little traffic for a key holds few of its tokens.
 */
export interface Demand {
  /** Decayed sum of costs seen. */
  sum: number;
  at: number;
}

/** Time constant of the decay: demand older than a few seconds stops counting. */
const TAU_MS = 1000;

export function noteDemand(d: Demand, now: number, cost: number): void {
  d.sum = d.sum * Math.exp(-Math.max(0, now - d.at) / TAU_MS) + cost;
  d.at = Math.max(d.at, now);
}

export function demandPerMs(d: Demand, now: number): number {
  return (d.sum * Math.exp(-Math.max(0, now - d.at) / TAU_MS)) / TAU_MS;
}
