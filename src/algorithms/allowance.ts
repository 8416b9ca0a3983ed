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
 * An allowance from `room` tokens left of `capacity`: none below half the capacity, else what is
 * above `base` over twice the fleet, and none unless it covers `max(1, min, want)` (a busy instance
 * asking for more than its share is leased tokens instead, which keeps the count exact). So the
 * allowances a whole fleet holds at once take at most half of `room - base`.
 *
 * `base` is 0 for a bucket: it refills, and what allowances admit beyond it is paid back as it
 * does (at most half the burst outstanding). A window is never refilled, so its allowances must
 * shrink to nothing by the time leases take the rest: `base` is half its limit (at most a quarter
 * of the limit outstanding, and little of it left when the room comes down to half). Sized on the
 * whole room, a window at 6× its limit admitted 7.6 % over (test/windowAccuracy.test.ts).
 */
export function allowanceFrom(room: number, capacity: number, base: number, ask: AllowanceAsk): number {
  if (ask.allowance <= 0 || ask.fleet < 1 || room < capacity / 2) return 0;
  const allowance = Math.min(ask.allowance, Math.floor((room - base) / (2 * ask.fleet)));
  return allowance < Math.max(1, ask.min, ask.want) ? 0 : allowance;
}
