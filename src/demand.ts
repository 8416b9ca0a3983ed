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

export function noteDemand(d: Demand, now: number, cost: number): void {
  d.demandSum = d.demandSum * Math.exp(-Math.max(0, now - d.demandAt) / TAU_MS) + cost;
  d.demandAt = Math.max(d.demandAt, now);
}

export function demandPerMs(d: Demand, now: number): number {
  return (d.demandSum * Math.exp(-Math.max(0, now - d.demandAt) / TAU_MS)) / TAU_MS;
}

/**
 * Slow start: a lease (of tokens or of free slots) doubles from the last one granted, from 1 for a
 * key without history, up to `cap` and to what the demand asks for (`Infinity`: not counted).
 */
export function leaseSize(lastGrant: number, cap: number, demand = Number.POSITIVE_INFINITY): number {
  return Math.min(cap, Math.max(1, lastGrant * 2), demand);
}
