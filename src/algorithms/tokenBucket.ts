/**
 * Token bucket with leases: the shared allocator both stores run (the Lua in
 * `lua/token_bucket_acquire.lua` and `lua/token_bucket_release.lua` is a line-by-line port).
 *
 * Over the limit: a request for `min` tokens is refused (nothing is debited) unless
 * `level + ahead >= min`. `ahead` lets a lease reach into the future: the level may go negative
 * down to `-ahead`, and the granted tokens only become usable as the refill covers them
 * (see `src/lease.ts`). With `ahead = 0` and `want = min = cost` this is the exact bucket.
 *
 * Clock jumps of the store (gateway clocks never enter: the store's time is used): a forward jump
 * refills at most to `burst`, as a long idle period would, so it never grants more than one burst;
 * a backward jump refills nothing (elapsed time is clamped at 0) and moves `ts` back on the next
 * write, refusals included, so refill resumes from the new time instead of waiting for the old one.
 *
 * Arithmetic is kept in the same order as the Lua so both produce bit-identical doubles.
 */
import { allowanceFrom } from './allowance.js';

import { type Estimate, unchanged } from './estimate.js';
import type { Transition } from './transition.js';

/** Stored state of one bucket. An absent bucket is full. */
export interface TokenBucketState {
  /** Tokens in the bucket at `ts`; negative when leases reach into the future. */
  readonly level: number;
  /** Store time in ms of the last write. */
  readonly ts: number;
}

export interface TokenBucketShape {
  /** Tokens added per `periodMs`. */
  readonly rate: number;
  readonly periodMs: number;
  /** Capacity. */
  readonly burst: number;
}

export interface AcquireRequest extends TokenBucketShape {
  /** Tokens wanted for the lease. */
  readonly want: number;
  /** Fewest tokens worth granting (the cost that is waiting); below it nothing is granted. */
  readonly min: number;
  /** How far below zero the level may go: tokens that may be leased before they exist. */
  readonly ahead: number;
}

export interface AcquireResult {
  readonly granted: number;
  /** Level after refill and before the debit: where this lease's tokens start in the queue. */
  readonly levelBefore: number;
  /** The store's clock when it decided. */
  readonly now: number;
}

export interface ReleaseRequest extends TokenBucketShape {
  readonly tokens: number;
}

export function refill(state: TokenBucketState | undefined, now: number, shape: TokenBucketShape): number {
  if (state === undefined) return shape.burst;
  // A clock that went backwards refills nothing rather than blocking until it catches up.
  const elapsed = Math.max(0, now - state.ts);
  return Math.min(shape.burst, state.level + (elapsed * shape.rate) / shape.periodMs);
}

/**
 * Longest TTL a stored bucket gets (about 317 years). Validated policies stay far below it; it only
 * guarantees that every key expires (Redis rejects larger PEXPIRE values after the state is written).
 */
export const MAX_TTL_MS = 1e13;

/**
 * Milliseconds until a bucket at `level` is full again: after that its key carries no information.
 * The extra millisecond absorbs rounding, so an expired bucket is always really full.
 */
export function msUntilFull(level: number, shape: TokenBucketShape): number {
  return Math.min(Math.ceil(((shape.burst - level) * shape.periodMs) / shape.rate) + 1, MAX_TTL_MS);
}

export function acquire(
  state: TokenBucketState | undefined,
  now: number,
  req: AcquireRequest,
): Transition<TokenBucketState, AcquireResult> {
  const level = refill(state, now, req);
  const room = level + req.ahead;
  let granted = 0;
  if (room >= req.want) granted = req.want;
  else if (room >= req.min) granted = room;
  if (granted === 0) {
    // A refusal writes nothing (same reference, same expiry) unless the store clock went backwards:
    // then `ts` moves back to now, or the bucket would refill nothing until the clock caught up.
    if (state === undefined || now >= state.ts)
      return { state, ttlMs: 0, result: { granted, levelBefore: level, now } };
    return {
      state: { level, ts: now },
      ttlMs: msUntilFull(level, req),
      result: { granted, levelBefore: level, now },
    };
  }
  const next = level - granted;
  return {
    state: { level: next, ts: now },
    ttlMs: msUntilFull(next, req),
    result: { granted, levelBefore: level, now },
  };
}

/** Hands unused leased tokens back; the bucket never rises above its capacity. */
export function release(
  state: TokenBucketState | undefined,
  now: number,
  req: ReleaseRequest,
): Transition<TokenBucketState, null> {
  if (state === undefined) return { state: undefined, ttlMs: 0, result: null };
  const next = Math.min(req.burst, refill(state, now, req) + req.tokens);
  return { state: { level: next, ts: now }, ttlMs: msUntilFull(next, req), result: null };
}

/** Milliseconds until `min` tokens fit in the window of a bucket at `level`. */
export function msUntilRoom(level: number, shape: TokenBucketShape, min: number, ahead: number): number {
  const missing = min - (level + ahead);
  if (missing <= 0) return 0;
  return (missing * shape.periodMs) / shape.rate;
}

/** What a request of cost 1 would see now, changing nothing (port: `lua/token_bucket_peek.lua`). */
export function peek(
  state: TokenBucketState | undefined,
  now: number,
  shape: TokenBucketShape,
): Transition<TokenBucketState, Estimate> {
  const level = refill(state, now, shape);
  const resetMs = level >= shape.burst ? 0 : ((shape.burst - level) * shape.periodMs) / shape.rate;
  const retryMs = level >= 1 ? 0 : ((1 - level) * shape.periodMs) / shape.rate;
  return unchanged(state, { remaining: level, resetMs, retryMs });
}

export interface DebitRequest extends TokenBucketShape {
  readonly tokens: number;
}

/**
 * Writes back tokens a fail-policy fallback admitted while the store was unreachable, so an outage
 * does not hand every client a fresh bucket. Unlike `acquire` it never refuses: it takes what is
 * there, down to empty and no further (a debt the outage ran up is not carried into the future), and
 * a level already below zero (leases reaching ahead) is left alone.
 */
export function debit(
  state: TokenBucketState | undefined,
  now: number,
  req: DebitRequest,
): Transition<TokenBucketState, number> {
  const level = refill(state, now, req);
  const next = Math.max(level - req.tokens, Math.min(level, 0));
  if (next === level && state !== undefined && now >= state.ts) return { state, ttlMs: 0, result: 0 };
  return { state: { level: next, ts: now }, ttlMs: msUntilFull(next, req), result: level - next };
}

export interface SyncRequest extends TokenBucketShape {
  /** Tokens this instance admitted under its allowance since its last sync: debited now. */
  readonly used: number;
  /** Leased tokens this instance hands back unused: credited now, up to the capacity. */
  readonly returned: number;
  /** Lease wanted when no allowance is granted (0: none). */
  readonly want: number;
  /** Fewest tokens worth granting, as a lease or an allowance (0 with `want` 0). */
  readonly min: number;
  /** How far below zero a lease may take the level. */
  readonly ahead: number;
  /** Most allowance wanted (0: none, e.g. a plain report). */
  readonly allowance: number;
  /** Instances sharing the limits (0: unknown, then no allowance is granted). */
  readonly fleet: number;
}

export interface SyncResult extends AcquireResult {
  /**
   * Tokens the instance may admit on its own before its next sync, taken from nothing: they are
   * debited when reported (`used`). At most the level over twice the fleet, so however the
   * instances of a fleet spend their allowances at once they take at most half of what was left.
   */
  readonly allowance: number;
}

/**
 * One instance's dialogue with a bucket in one step: settle what it admitted and what it hands
 * back, then grant an allowance when the bucket is far from empty, else a lease as `acquire` does.
 *
 * Over the limit: an allowance is `level / (2 * fleet)`, granted only while the bucket is at least
 * half full and only where it covers `max(1, min, want)` (an instance whose demand it serves as
 * well as a lease would; `allowanceFrom`). Every instance's allowance is replaced (not added to) at
 * its next sync, so the tokens admitted under allowances and not yet reported never exceed half
 * the burst, as long as `fleet` is at least the number of instances: that is the most the fleet
 * can admit beyond the exact bucket, and the refill pays it back. Reported usage may take the level below zero (below
 * what leases took, too): the bucket then refuses until the refill has paid the debt back.
 */
export function sync(
  state: TokenBucketState | undefined,
  now: number,
  req: SyncRequest,
): Transition<TokenBucketState, SyncResult> {
  const refilled = refill(state, now, req);
  // Reported usage is charged in full, wherever leases left the level: those tokens were admitted.
  const settled = Math.min(req.burst, refilled + req.returned);
  const level = settled - req.used;
  const allowance = allowanceFrom(level, req.burst, 0, req);
  let granted = 0;
  if (allowance === 0 && req.want > 0) {
    const room = level + req.ahead;
    if (room >= req.want) granted = req.want;
    else if (req.min > 0 && room >= req.min) granted = room;
  }
  const result = { granted, allowance, levelBefore: level, now };
  // Nothing to settle and nothing leased: nothing is written (an absent bucket is full anyway),
  // unless the store clock went backwards, as for a refusal in `acquire`.
  const settles = req.used > 0 || (req.returned > 0 && state !== undefined);
  if (!settles && granted === 0) {
    if (state === undefined || now >= state.ts) return { state, ttlMs: 0, result };
    return { state: { level, ts: now }, ttlMs: msUntilFull(level, req), result };
  }
  const next = level - granted;
  return { state: { level: next, ts: now }, ttlMs: msUntilFull(next, req), result };
}
