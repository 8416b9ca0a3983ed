/**
 * The write-behind allowance rule every leased counter shares (token bucket, fixed window, sliding
 * window): how many tokens one instance may admit on its own, counted only when it reports them.
 * `lua/prelude.lua` has the port (`allowance_from`), same arithmetic order.
 */

export interface AllowanceAsk {
  /** Most allowance wanted (0: none). */
  readonly allowance: number;
  /** Instances sharing the limits (0: unknown, then no allowance is granted). */
  readonly fleet: number;
  /** Lease wanted instead (0: none). */
  readonly want: number;
  /** Fewest tokens worth granting. */
  readonly min: number;
}

/**
 * An allowance from `room` tokens left of `capacity`: the room above half the capacity over twice
 * the fleet, and none unless it covers `max(1, min, want)` (a busy instance asking for more than
 * its share is leased tokens instead, which keeps the count exact). So the allowances a whole fleet
 * holds at once, spent at once, take at most half of what is above half the capacity: a quarter of
 * the capacity at most. And they shrink to nothing as the room comes down to half: by the time
 * leases take the rest, what allowances still admit beyond the count is small.
 */
export function allowanceFrom(room: number, capacity: number, ask: AllowanceAsk): number {
  if (ask.allowance <= 0 || ask.fleet < 1 || room < capacity / 2) return 0;
  const allowance = Math.min(ask.allowance, Math.floor((room - capacity / 2) / (2 * ask.fleet)));
  return allowance < Math.max(1, ask.min, ask.want) ? 0 : allowance;
}
