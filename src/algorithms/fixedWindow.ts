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
 * The Lua in `lua/fixed_window_acquire.lua` and `lua/fixed_window_release.lua` is a line-by-line port.
 */
import type { Transition } from './tokenBucket.js';
import {
  grantFrom,
  type WindowAcquireRequest,
  type WindowGrant,
  type WindowReleaseRequest,
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

/** The window a request at `now` counts in; a clock that went backwards stays in the stored window. */
function current(state: FixedWindowState | undefined, now: number, req: WindowAcquireRequest): number {
  if (req.firstHit && req.windowMs !== MONTH) {
    return state !== undefined && now < windowEnd(state.window, req.windowMs)
      ? state.window
      : now / req.windowMs;
  }
  const index = windowIndex(now, req.windowMs);
  return state !== undefined && state.window > index ? state.window : index;
}

export function acquire(
  state: FixedWindowState | undefined,
  now: number,
  req: WindowAcquireRequest,
): Transition<FixedWindowState, WindowGrant> {
  const window = current(state, now, req);
  const used = state !== undefined && state.window === window ? state.count : 0;
  // A window opening at this hit lasts exactly its length (its fractional index would round).
  const opensNow = req.firstHit && req.windowMs !== MONTH && window !== state?.window;
  const msLeft = opensNow ? req.windowMs : windowEnd(window, req.windowMs) - now;
  const room = req.limit - used;
  const granted = grantFrom(room, req.want, req.min);
  if (granted === 0) {
    // A refusal writes nothing and is not counted.
    const result = {
      granted,
      remaining: room,
      opensPerMs: 0,
      window,
      msLeft,
      retryMs: msLeft,
      resetMs: used > 0 ? msLeft : 0,
    };
    return { state, ttlMs: 0, result };
  }
  return {
    state: { window, count: used + granted },
    // The key expires with its window. Redis sets this once, when the window's first grant creates
    // the key, and never again: the absolute expiry is the same on every later grant.
    ttlMs: Math.ceil(msLeft),
    result: {
      granted,
      remaining: room - granted,
      opensPerMs: 0,
      window,
      msLeft,
      retryMs: 0,
      resetMs: msLeft,
    },
  };
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
