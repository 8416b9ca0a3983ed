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
  /**
   * Tokens leases took that existed when granted and may still come back unused (absent: none),
   * handed back by `lentUntil` (store time) at the latest: a refusal's wait is no later than that.
   */
  readonly lent?: number;
  readonly lentUntil?: number;
}

/** Leased tokens that may come back, and by when (store time), as a reply states them. */
export interface Lent {
  /** Tokens leases took that existed when granted, not handed back yet (0: none). */
  readonly lent: number;
  /** Ms from the store's now until they are handed back at the latest (0 with `lent` 0). */
  readonly lentMs: number;
}

/** Leased tokens that may come back and by when (store time); `until` means nothing with `lent` 0. */
interface Held {
  readonly lent: number;
  readonly until: number;
}

/** What a bucket nobody holds leased tokens of says: one object, as every exact decision asks. */
const NOTHING_HELD: Held = { lent: 0, until: 0 };

/**
 * What `state` says leases hold at `now`: nothing once their hand-back time has passed, nor in a
 * bucket refilled to `level` full (its key may expire any moment, and a full bucket refuses nothing).
 */
function heldAt(state: TokenBucketState | undefined, now: number, level: number, burst: number): Held {
  if (
    state?.lent === undefined ||
    state.lentUntil === undefined ||
    now >= state.lentUntil ||
    level >= burst
  ) {
    return NOTHING_HELD;
  }
  return { lent: state.lent, until: state.lentUntil };
}

/** The state to write: `level` at `now`, with what leases hold when they hold something. */
function written(level: number, now: number, lent: number, until: number): TokenBucketState {
  return lent > 0 ? { level, ts: now, lent, lentUntil: until } : { level, ts: now };
}

/**
 * A reply's `lentMs` (see `Lent`): a field of the result literal, not an object spread into it (an
 * allocation and a copy on every exact decision).
 */
function lentMsOf(lent: number, until: number, now: number): number {
  return lent > 0 ? until - now : 0;
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

export interface AcquireResult extends Lent {
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
  const held = heldAt(state, now, level, req.burst);
  const room = level + req.ahead;
  let granted = 0;
  if (room >= req.want) granted = req.want;
  else if (room >= req.min) granted = room;
  const result: AcquireResult = {
    granted,
    levelBefore: level,
    now,
    lent: held.lent,
    lentMs: lentMsOf(held.lent, held.until, now),
  };
  if (granted === 0) {
    // A refusal writes nothing (same reference, same expiry) unless the store clock went backwards:
    // then `ts` moves back to now, or the bucket would refill nothing until the clock caught up.
    if (state === undefined || now >= state.ts) return { state, ttlMs: 0, result };
    return { state: written(level, now, held.lent, held.until), ttlMs: msUntilFull(level, req), result };
  }
  // An exact decision spends what it takes at once: nothing of it comes back.
  const next = level - granted;
  return { state: written(next, now, held.lent, held.until), ttlMs: msUntilFull(next, req), result };
}

/** Hands unused leased tokens back; the bucket never rises above its capacity. */
export function release(
  state: TokenBucketState | undefined,
  now: number,
  req: ReleaseRequest,
): Transition<TokenBucketState, null> {
  if (state === undefined) return { state: undefined, ttlMs: 0, result: null };
  const refilled = refill(state, now, req);
  const next = Math.min(req.burst, refilled + req.tokens);
  const held = heldAt(state, now, refilled, req.burst);
  return { state: written(next, now, held.lent, held.until), ttlMs: msUntilFull(next, req), result: null };
}

/**
 * Milliseconds until `min` tokens fit in the window of a bucket at `level`. With tokens out in
 * leases (`lent`), no later than they are handed back, if they cover what is missing, or the
 * refill of what they do not cover: the wait is true if the holders do not spend them, and the
 * request is decided by the store again either way.
 */
export function msUntilRoom(
  level: number,
  shape: TokenBucketShape,
  min: number,
  ahead: number,
  lent: Lent = { lent: 0, lentMs: 0 },
): number {
  const missing = min - (level + ahead);
  if (missing <= 0) return 0;
  const refilled = (missing * shape.periodMs) / shape.rate;
  if (lent.lent <= 0) return refilled;
  const rest = Math.max(0, missing - lent.lent);
  return Math.min(refilled, Math.max(lent.lentMs, (rest * shape.periodMs) / shape.rate));
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
  const held = heldAt(state, now, level, req.burst);
  return {
    state: written(next, now, held.lent, held.until),
    ttlMs: msUntilFull(next, req),
    result: level - next,
  };
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
  /**
   * Longest a lease's existing tokens are held unused before they are handed back (the lease
   * `ttl`): the store counts them as lent until then.
   */
  readonly holdMs: number;
  /** Tokens of this instance's leases it spent since it last said: they will not come back. */
  readonly spent: number;
}

export interface SyncResult extends AcquireResult {
  /**
   * Tokens the instance may admit on its own before its next sync, taken from nothing: they are
   * debited when reported (`used`). At most the burst over twice the fleet (`allowanceFrom`),
   * granted only from half full, so however the instances of a fleet spend their allowances at once
   * they take at most half the burst, never more than was left when the last of them was granted.
   */
  readonly allowance: number;
}

/**
 * From this share of the burst up, allowances are sized on the burst rather than the level
 * (`allowanceFrom`; lua/token_bucket_sync.lua has the same threshold).
 */
const ALLOWANCE_ON_BURST_FROM = 3 / 4;

/**
 * One instance's dialogue with a bucket in one step: settle what it admitted and what it hands
 * back, then grant an allowance when the bucket is far from empty, else a lease as `acquire` does.
 *
 * Over the limit: an allowance is `burst / (2 * fleet)` (`level / (2 * fleet)` below
 * `ALLOWANCE_ON_BURST_FROM` of the burst), granted only while the bucket is at least half full and
 * only where it covers `max(1, min, want)` (an instance whose demand it serves as well as a lease
 * would; `allowanceFrom`). Every instance's allowance is replaced (not added to) at
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
  const pool = level >= ALLOWANCE_ON_BURST_FROM * req.burst ? req.burst : level;
  const allowance = allowanceFrom(level, req.burst, pool, req);
  let granted = 0;
  if (allowance === 0 && req.want > 0) {
    const room = level + req.ahead;
    if (room >= req.want) granted = req.want;
    else if (req.min > 0 && room >= req.min) granted = room;
  }
  // What leases hold of existing tokens: less what comes back now, plus what this lease takes of
  // them (its tokens below zero exist only later and are not counted).
  const held = heldAt(state, now, refilled, req.burst);
  let lent = Math.max(0, held.lent - req.returned - req.spent);
  let until = lent > 0 ? held.until : now;
  const existing = Math.min(granted, Math.max(0, level));
  if (existing > 0 && req.holdMs > 0) {
    lent += existing;
    // Held until the last of its tokens exists, and a lease time after.
    until = Math.max(until, now + req.holdMs + ((granted - existing) * req.periodMs) / req.rate);
  }
  const result: SyncResult = {
    granted,
    allowance,
    levelBefore: level,
    now,
    lent,
    lentMs: lentMsOf(lent, until, now),
  };
  // Nothing to settle and nothing leased: nothing is written (an absent bucket is full anyway),
  // unless the store clock went backwards, as for a refusal in `acquire`.
  const settles = req.used > 0 || (req.returned > 0 && state !== undefined);
  if (!settles && granted === 0) {
    if (state === undefined || now >= state.ts) return { state, ttlMs: 0, result };
    return { state: written(level, now, lent, until), ttlMs: msUntilFull(level, req), result };
  }
  const next = level - granted;
  return { state: written(next, now, lent, until), ttlMs: msUntilFull(next, req), result };
}
