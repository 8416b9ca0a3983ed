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
 * An allowance from `room` tokens left of `capacity`: none below half the capacity, else `pool`
 * over twice the fleet, and none unless it covers `max(1, min, want)` (a busy instance asking for
 * more than its share is leased tokens instead, which keeps the count exact). So the allowances a
 * whole fleet holds at once take at most half of `pool`.
 *
 * A bucket's `pool` is its level, or its burst while it is at least three quarters full: it refills,
 * and what allowances admit beyond it is paid back as it does. Each allowance is at most the burst
 * over twice the fleet and granted only from half full, so those outstanding (at most half the
 * burst) never exceed the level the last of them was granted at. Sized on the level alone, a tail
 * key's allowance was 5 where it is now 6 (burst 100, 8 instances), and the fleet bench's 10k Zipf
 * keys cost 0.244–0.291 Redis commands per decision (`npm run bench -- --case=fleet-redis`, see
 * docs/architecture.md). Sized on the burst down to half full, a hot key just over its limit was
 * refused more while the exact bucket still had tokens (`npm run sim -- --scenario one-key-1.05x`,
 * seeds 1–5: 4–35 such refusals, against 0–11 on the level and 2–17 now).
 * A window is never refilled, so its allowances must shrink to nothing by the time leases take the
 * rest: its `pool` is the room above half its limit (at most a quarter of the limit outstanding, and
 * little of it left when the room comes down to half). Sized on the whole room, a window at 6× its
 * limit admitted 7.6 % over (test/windowAccuracy.test.ts).
 */
export function allowanceFrom(room: number, capacity: number, pool: number, ask: AllowanceAsk): number {
  if (ask.allowance <= 0 || ask.fleet < 1 || room < capacity / 2) return 0;
  const allowance = Math.min(ask.allowance, Math.floor(pool / (2 * ask.fleet)));
  return allowance < Math.max(1, ask.min, ask.want) ? 0 : allowance;
}

/**
 * A window's allowance (fixed or sliding): `allowanceFrom` with the room above half the limit as
 * its pool, so allowances shrink to nothing by the time leases take the rest (see above).
 */
export function windowAllowanceFrom(room: number, limit: number, ask: AllowanceAsk): number {
  return allowanceFrom(room, limit, room - limit / 2, ask);
}
