/**
 * Sliding window counter (two windows, interpolated): the count of the current fixed window plus
 * the previous window's count weighted by how much of it the sliding window still covers,
 * `previous * (end - now) / window + current`. Two numbers per key, smooth at the window edge.
 *
 * Over the limit: a request is refused without being counted while `estimate + cost > limit`.
 * A lease may reach ahead into what the previous count frees before the window ends (`ahead`):
 * those tokens are counted at once and become usable as they open, like the token bucket's.
 * The estimate assumes the previous window's requests were spread evenly. Worst case: if they all
 * came at its very end, the true count over the last `window` is up to `previous * f` higher than
 * the estimate (f = fraction of the current window elapsed), so a trailing window can hold up to
 * `limit + previous * f < 2 × limit`; with evenly spread traffic the error is zero. Each fixed
 * window on its own never exceeds `limit`.
 *
 * The Lua in `lua/sliding_window_acquire.lua` and `lua/sliding_window_release.lua` is a line-by-line
 * port: keep the arithmetic in the same order so both produce identical doubles.
 */
import type { Transition } from './tokenBucket.js';
import {
  grantFrom,
  type WindowAcquireRequest,
  type WindowGrant,
  type WindowReleaseRequest,
} from './window.js';

/** Stored state: counts of the window `window` and of the one before it. */
export interface SlidingWindowState {
  readonly window: number;
  readonly current: number;
  readonly previous: number;
}

/** The state as seen from window `index`: counts older than the previous window no longer matter. */
function roll(state: SlidingWindowState | undefined, index: number): SlidingWindowState {
  if (state === undefined || state.window < index - 1) return { window: index, current: 0, previous: 0 };
  if (state.window === index - 1) return { window: index, current: 0, previous: state.current };
  return state;
}

/** Ms from `now` until `min` tokens fit, for counts `s` of the window ending at `end`. */
export function msUntilRoom(
  s: SlidingWindowState,
  now: number,
  end: number,
  req: Pick<WindowAcquireRequest, 'limit' | 'windowMs' | 'min'>,
): number {
  const spare = req.limit - s.current - req.min;
  // Within this window the previous count's weight falls linearly to zero at `end`.
  if (spare >= 0 && s.previous > 0) return Math.max(0, end - (req.windowMs * spare) / s.previous - now);
  if (spare >= 0) return 0;
  // In the next window this window's count becomes the decaying one.
  if (s.current <= 0) return end - now;
  return Math.max(end, end + req.windowMs - (req.windowMs * (req.limit - req.min)) / s.current) - now;
}

function resetIn(s: SlidingWindowState, now: number, end: number, windowMs: number): number {
  if (s.current > 0) return end + windowMs - now;
  if (s.previous > 0) return end - now;
  return 0;
}

export function acquire(
  state: SlidingWindowState | undefined,
  now: number,
  req: WindowAcquireRequest,
): Transition<SlidingWindowState, WindowGrant> {
  // A clock that went backwards stays in the stored window (the older count then weighs more).
  const index = Math.max(Math.floor(now / req.windowMs), state?.window ?? 0);
  const s = roll(state, index);
  const end = (index + 1) * req.windowMs;
  // What the previous count still weighs: it opens as room, linearly, until `end`.
  const opening = (s.previous * (end - now)) / req.windowMs;
  const room = req.limit - (opening + s.current);
  // Leasing ahead may take what opens before the window ends; each fixed window stays <= limit.
  const reach = req.ahead ? room + opening : room;
  const granted = grantFrom(reach, req.want, req.min);
  const msLeft = end - now;
  const opensPerMs = s.previous / req.windowMs;
  if (granted === 0) {
    const result = {
      granted,
      remaining: Math.max(0, room),
      opensPerMs,
      window: index,
      msLeft,
      // Nothing more opens in this window: the next one starts with this count as its previous.
      retryMs: req.ahead ? msLeft : msUntilRoom(s, now, end, req),
      resetMs: resetIn(s, now, end, req.windowMs),
    };
    return { state, ttlMs: 0, result };
  }
  const next = { window: index, current: s.current + granted, previous: s.previous };
  return {
    state: next,
    // The current count matters until the end of the next window (it is that window's `previous`).
    // Redis sets this once per window, when the window's first grant rolls the counts over.
    ttlMs: Math.ceil(msLeft + req.windowMs),
    result: {
      granted,
      remaining: room - granted,
      opensPerMs,
      window: index,
      msLeft,
      retryMs: 0,
      resetMs: resetIn(next, now, end, req.windowMs),
    },
  };
}

/**
 * Hands unused tokens back to the window they were granted in: to the current count while that
 * window lasts, to the previous count during the next one, and nowhere after that.
 */
export function release(
  state: SlidingWindowState | undefined,
  now: number,
  req: WindowReleaseRequest,
): Transition<SlidingWindowState, null> {
  if (state === undefined) return { state, ttlMs: 0, result: null };
  const ttlMs = Math.ceil((state.window + 2) * req.windowMs - now);
  if (state.window === req.window) {
    const next = { ...state, current: Math.max(0, state.current - req.tokens) };
    return { state: next, ttlMs, result: null };
  }
  if (state.window === req.window + 1) {
    const next = { ...state, previous: Math.max(0, state.previous - req.tokens) };
    return { state: next, ttlMs, result: null };
  }
  return { state, ttlMs: 0, result: null };
}
