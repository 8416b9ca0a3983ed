/**
 * Leaky bucket as a shaper (GCRA-style virtual scheduling): requests drain at a steady `rate`; each
 * admitted request takes the next free stretch of the drain, `cost * period / rate` ms long.
 * `tat` (theoretical arrival time) is when the drain catches up with everything admitted so far.
 * `burst` units may pass without waiting; beyond that a request is admitted with a delay — it must
 * wait until its turn — and the bucket refuses only when that delay would exceed `maxWaitMs`.
 * With `maxWaitMs = 0` it is a plain meter: admit now or refuse.
 *
 * Over the limit: refused (nothing recorded) when the wait would exceed the caller's bound; the
 * caller learns how much longer than its bound the wait would have been. Guarantee: over any
 * interval of length T the admitted requests START at most `burst + rate * T / period` units.
 *
 * The Lua in `lua/leaky_bucket_reserve.lua` and `lua/leaky_bucket_cancel.lua` is a line-by-line port.
 */
import { type Estimate, unchanged } from './estimate.js';
import type { Transition } from './transition.js';

/** Stored state; an absent bucket is empty (tat <= now). */
export interface LeakyBucketState {
  /** Store time in ms at which everything admitted so far has drained. */
  readonly tat: number;
}

export interface LeakyBucketShape {
  /** Units drained per `periodMs`. */
  readonly rate: number;
  readonly periodMs: number;
  /** Units that may pass at once into an empty bucket. */
  readonly burst: number;
}

export interface ReserveRequest extends LeakyBucketShape {
  readonly cost: number;
  /** Longest acceptable wait in ms; 0 admits only what can pass right away. */
  readonly maxWaitMs: number;
}

export interface ReserveResult {
  readonly allowed: boolean;
  /** Ms the request must wait before it may proceed (allowed), or would have had to (refused). */
  readonly delayMs: number;
  /** Ms of drain queued after this call (after the reservation when allowed). */
  readonly backlogMs: number;
}

export interface CancelRequest extends Pick<LeakyBucketShape, 'rate' | 'periodMs'> {
  /** The cost of the reservation given back. */
  readonly cost: number;
}

/** Ms the drain needs for `units`. */
export function drainMs(units: number, shape: Pick<LeakyBucketShape, 'rate' | 'periodMs'>): number {
  return (units * shape.periodMs) / shape.rate;
}

export function reserve(
  state: LeakyBucketState | undefined,
  now: number,
  req: ReserveRequest,
): Transition<LeakyBucketState, ReserveResult> {
  const start = state === undefined ? now : Math.max(state.tat, now);
  const tat = start + drainMs(req.cost, req);
  // From the backlog, not from `tat - now`: with `now` in the trillions that difference loses the
  // low bits, and a fresh bucket would refuse a request of exactly `burst` (found by the fuzz test).
  const delayMs = Math.max(0, start - now + drainMs(req.cost, req) - drainMs(req.burst, req));
  if (delayMs > req.maxWaitMs) {
    return { state, ttlMs: 0, result: { allowed: false, delayMs, backlogMs: start - now } };
  }
  return {
    state: { tat },
    // After `tat` the bucket is empty, which is what an absent key means.
    ttlMs: Math.ceil(tat - now) + 1,
    result: { allowed: true, delayMs, backlogMs: tat - now },
  };
}

/** Gives a reservation back (a cancelled wait): the drain ends `cost` units earlier. */
/**
 * What a request of cost 1 with no wait (a `consume`) would see now, changing nothing
 * (port: `lua/leaky_bucket_peek.lua`).
 */
export function peek(
  state: LeakyBucketState | undefined,
  now: number,
  shape: LeakyBucketShape,
): Transition<LeakyBucketState, Estimate> {
  const backlogMs = state === undefined ? 0 : Math.max(state.tat, now) - now;
  const retryMs = Math.max(0, backlogMs + drainMs(1, shape) - drainMs(shape.burst, shape));
  const remaining = shape.burst - (backlogMs * shape.rate) / shape.periodMs;
  return unchanged(state, { remaining, resetMs: backlogMs, retryMs });
}

export function cancel(
  state: LeakyBucketState | undefined,
  now: number,
  req: CancelRequest,
): Transition<LeakyBucketState, null> {
  if (state === undefined) return { state, ttlMs: 0, result: null };
  const tat = state.tat - drainMs(req.cost, req);
  if (tat <= now) return { state: undefined, ttlMs: 0, result: null };
  return { state: { tat }, ttlMs: Math.ceil(tat - now) + 1, result: null };
}
