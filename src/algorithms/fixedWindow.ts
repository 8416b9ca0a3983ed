/**
 * Fixed window: at most `limit` tokens per window (a minute, a day, a calendar month in UTC).
 * The counter is reset when a new window starts; windows are aligned to the Unix epoch (UTC), or
 * with `firstHit` open at the first grant after the previous window ended (index = start / length).
 *
 * Over the limit: a request is refused without being counted (unlike a plain INCR counter, which counts
 * refusals too) until the window ends. Windows are independent, so a client can spend `limit` at
 * the end of one window and `limit` again at the start of the next: up to 2 × `limit` in a short
 * interval across an edge. That is the price of one counter per key.
 *
 * The Lua in `lua/fixed_window_acquire.lua`, `lua/fixed_window_release.lua` and
 * `lua/fixed_window_sync.lua` (with helpers in `lua/prelude.lua`) is a line-by-line port.
 */
import { windowAllowanceFrom } from './allowance.js';
import { type Estimate, unchanged } from './estimate.js';
import type { Transition } from './transition.js';
import {
  grantFrom,
  leaseMin,
  settled,
  type WindowAcquireRequest,
  type WindowGrant,
  type WindowPeekRequest,
  type WindowReleaseRequest,
  type WindowSyncRequest,
  type WindowSyncResult,
  withAllowance,
} from './window.js';

/** `windowMs` value meaning calendar months in UTC. */
export const MONTH = 0;

/** Stored state: the count of one window. A state of an earlier window means the same as none. */
export interface FixedWindowState {
  readonly window: number;
  readonly count: number;
}

/** Index of the window containing `now`: months since year 0 for `MONTH`, else `now / windowMs`. */
export function windowIndex(now: number, windowMs: number): number {
  if (windowMs !== MONTH) return Math.floor(now / windowMs);
  const d = new Date(Math.floor(now));
  return d.getUTCFullYear() * 12 + d.getUTCMonth();
}

/** Start in ms of window `index`. */
export function windowStart(index: number, windowMs: number): number {
  // A first-hit index is fractional (start / windowMs): rounded to the microsecond, its product is
  // the start again rather than a hair off it (which would round a whole second up in headers).
  if (windowMs !== MONTH) return Math.round(index * windowMs * 1000) / 1000;
  return Date.UTC(Math.floor(index / 12), index % 12, 1);
}

/** End in ms (exclusive) of window `index`. */
export function windowEnd(index: number, windowMs: number): number {
  return windowStart(index + 1, windowMs);
}

/**
 * Whether the stored window lies more than one window after `now`: it was written under another
 * window length (a policy given a longer `window`, or two limiters giving one policy name different
 * windows) or before the clock went back by more than a window. Read as a window of this length,
 * it would end far in the future (a minute's index read as an hour's ends in the year 5000); its
 * count counts in the window of `now` instead, so nothing it counted is forgotten.
 */
function foreign(state: FixedWindowState, now: number, req: WindowPeekRequest): boolean {
  if (req.firstHit && req.windowMs !== MONTH)
    return windowStart(state.window, req.windowMs) > now + req.windowMs;
  return state.window > windowIndex(now, req.windowMs) + 1;
}

/** The window a request at `now` counts in; a clock that went backwards stays in the stored window. */
function current(state: FixedWindowState | undefined, now: number, req: WindowPeekRequest): number {
  if (req.firstHit && req.windowMs !== MONTH) {
    return state !== undefined && now < windowEnd(state.window, req.windowMs)
      ? state.window
      : now / req.windowMs;
  }
  const index = windowIndex(now, req.windowMs);
  return state !== undefined && state.window > index ? state.window : index;
}

/** The window a call at `now` counts in, what the state has counted in it, and how long it lasts. */
interface Counted {
  readonly window: number;
  readonly used: number;
  readonly msLeft: number;
  /** The state holds this window already (else a write opens it and sets the key's expiry). */
  readonly stored: boolean;
  /** A first-hit window opens with this call: a grant of any kind must write it, or it never opened. */
  readonly opens: boolean;
}

function counted(state: FixedWindowState | undefined, now: number, req: WindowPeekRequest): Counted {
  const carried = state !== undefined && foreign(state, now, req);
  const window = current(carried ? undefined : state, now, req);
  const stored = state !== undefined && state.window === window;
  const opens = req.firstHit === true && req.windowMs !== MONTH && !stored;
  // A window opening at this hit lasts exactly its length (its fractional index would round).
  const msLeft = opens ? req.windowMs : windowEnd(window, req.windowMs) - now;
  return { window, used: stored || carried ? state.count : 0, msLeft, stored, opens };
}

/** The answer to a call that leaves `room - granted` in window `c`; `refused`: a lease was refused. */
function answer(c: Counted, room: number, granted: number, refused: boolean): WindowGrant {
  return {
    granted,
    remaining: room - granted,
    opensPerMs: 0,
    window: c.window,
    msLeft: c.msLeft,
    retryMs: refused ? c.msLeft : 0,
    resetMs: c.used + granted > 0 ? c.msLeft : 0,
  };
}

/** Counts `count` in window `c`: the key expires with its window. */
function counting<R>(c: Counted, count: number, result: R): Transition<FixedWindowState, R> {
  // Redis sets the expiry once, when the window's first write creates the key, and never again:
  // the absolute expiry is the same on every later write.
  return { state: { window: c.window, count }, ttlMs: Math.ceil(c.msLeft), result };
}

export function acquire(
  state: FixedWindowState | undefined,
  now: number,
  req: WindowAcquireRequest,
): Transition<FixedWindowState, WindowGrant> {
  const c = counted(state, now, req);
  const room = req.limit - c.used;
  const granted = grantFrom(room, req.want, req.min);
  const result = answer(c, room, granted, granted === 0);
  // A refusal writes nothing and is not counted.
  if (granted === 0) return { state, ttlMs: 0, result };
  return counting(c, c.used + granted, result);
}

/**
 * One instance's dialogue with a window in one step: settle the usage it reports and the leased
 * tokens it hands back, then grant an allowance when the window is far from its limit, else a slice
 * as `acquire` does.
 *
 * Settling: `used` and `returned` go to window `req.window` only if it is the current one; an ended
 * window's usage no longer matters. A report may take the count above the limit: the window then
 * refuses until it ends.
 *
 * Over the limit (write-behind): an allowance is
 * `min(req.allowance, floor((room - limit / 2) / (2 * fleet)))` (`windowAllowanceFrom`),
 * granted only while `room >= limit / 2` and only where it covers `max(1, min, want)`; every
 * instance's allowance is replaced (not added to) at its next sync and dies with its window. With
 * `fleet` at least the number of instances N, the tokens a window admits are at most
 * `limit + (N - 1) * floor(limit / (4 * fleet))` (< 1.25 × limit), however the instances
 * interleave, and at most `limit` if no slice is granted while another instance holds an
 * allowance of that window (e.g. while every instance is far from the limit). Why: the count plus
 * the allowances held bounds what the window admitted, and it grows only at a grant; right after
 * an allowance (count <= limit / 2) it is at most `limit / 2 + N * limit / (4 * fleet)`
 * <= `3/4 limit`, right after a slice (which keeps the count <= limit) at most `limit` plus the others'
 * allowances. `test/unit/windowSync.test.ts` checks both on random fleets.
 */
export function sync(
  state: FixedWindowState | undefined,
  now: number,
  req: WindowSyncRequest,
): Transition<FixedWindowState, WindowSyncResult> {
  const ask = { ...req, min: leaseMin(req) };
  const found = counted(state, now, ask);
  const count = req.window === found.window ? settled(found.used, req) : undefined;
  const c = count === undefined ? found : { ...found, used: count };
  const room = ask.limit - c.used;
  const allowance = windowAllowanceFrom(room, ask.limit, ask);
  const leasing = allowance === 0 && ask.want > 0;
  const granted = leasing ? grantFrom(room, ask.want, ask.min) : 0;
  const result = withAllowance(answer(c, room, granted, leasing && granted === 0), allowance);
  // Nothing settled and nothing granted writes nothing; an allowance opening a first-hit window
  // writes it (counting nothing), or the next call would open another.
  if (count === undefined && granted === 0 && !(allowance > 0 && c.opens)) return { state, ttlMs: 0, result };
  return counting(c, c.used + granted, result);
}

/** What a request of cost 1 would see now, changing nothing (port: `lua/fixed_window_peek.lua`). */
export function peek(
  state: FixedWindowState | undefined,
  now: number,
  req: WindowPeekRequest,
): Transition<FixedWindowState, Estimate> {
  const c = counted(state, now, req);
  const room = req.limit - c.used;
  return unchanged(state, {
    remaining: room,
    resetMs: c.used > 0 ? c.msLeft : 0,
    retryMs: room >= 1 ? 0 : c.msLeft,
  });
}

/** Hands unused tokens of a slice back to the window they came from; any other window ignores them. */
export function release(
  state: FixedWindowState | undefined,
  now: number,
  req: WindowReleaseRequest,
): Transition<FixedWindowState, null> {
  if (state === undefined || state.window !== req.window) return { state, ttlMs: 0, result: null };
  return {
    state: { window: state.window, count: Math.max(0, state.count - req.tokens) },
    ttlMs: Math.ceil(windowEnd(state.window, req.windowMs) - now),
    result: null,
  };
}
