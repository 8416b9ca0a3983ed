/**
 * How many limiter instances share the store: each one beats every second or so, and the fleet is
 * the instances whose last beat is younger than the window. Allowances (see `sync` in
 * `tokenBucket.ts`) are shares of a bucket's level divided by this count, so an instance that left
 * still counts for one window (allowances are then smaller, never larger) and one that joined
 * counts from its first beat. The Lua in `lua/fleet_heartbeat.lua` is a line-by-line port.
 */
import type { Transition } from './transition.js';

/** Last beat (store time, ms) of each instance id. */
export type FleetState = Readonly<Record<string, number>>;

export interface HeartbeatRequest {
  /** The beating instance. */
  readonly id: string;
  /** An instance counts while its last beat is younger than this, in ms. */
  readonly windowMs: number;
}

/** Records a beat; the result is the number of instances in the fleet, this one included. */
export function heartbeat(
  state: FleetState | undefined,
  now: number,
  req: HeartbeatRequest,
): Transition<FleetState, number> {
  const next: Record<string, number> = { [req.id]: now };
  for (const [id, at] of Object.entries(state ?? {})) {
    if (id !== req.id && at > now - req.windowMs) next[id] = at;
  }
  return { state: next, ttlMs: req.windowMs, result: Object.keys(next).length };
}
