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
 * The Lua in `lua/sliding_window_acquire.lua`, `lua/sliding_window_release.lua` and
 * `lua/sliding_window_sync.lua` (with helpers in `lua/prelude.lua`) is a line-by-line port: keep
 * the arithmetic in the same order so both produce identical doubles.
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

/** Stored state: counts of the window `window` and of the one before it. */
export interface SlidingWindowState {
  readonly window: number;
  readonly current: number;
  readonly previous: number;
}

/**
 * The state as seen from window `index`: counts older than the previous window no longer matter,
 * and those of a window after `index` (`indexAt`: foreign) count in it.
 */
function roll(state: SlidingWindowState | undefined, index: number): SlidingWindowState {
  if (state === undefined || state.window < index - 1) return { window: index, current: 0, previous: 0 };
  if (state.window === index - 1) return { window: index, current: 0, previous: state.current };
  if (state.window > index) return { window: index, current: state.current, previous: state.previous };
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

function resetIn(current: number, previous: number, now: number, end: number, windowMs: number): number {
  if (current > 0) return end + windowMs - now;
  if (previous > 0) return end - now;
  return 0;
}

/** Where counts `s` (of window `s.window`) stand at `now`. */
interface Measured {
  readonly end: number;
  /** What the previous count still weighs: it opens as room, linearly, until `end`. */
  readonly opening: number;
  readonly room: number;
  readonly msLeft: number;
}

function measure(s: SlidingWindowState, now: number, req: WindowPeekRequest): Measured {
  const end = (s.window + 1) * req.windowMs;
  const opening = (s.previous * (end - now)) / req.windowMs;
  return { end, opening, room: req.limit - (opening + s.current), msLeft: end - now };
}

/** Tokens a slice may take: leasing ahead, also what opens before the window ends. */
function reach(m: Measured, req: WindowAcquireRequest): number {
  return req.ahead ? m.room + m.opening : m.room;
}

/** The answer to a call that granted a slice of `granted` from counts `s`; `refused`: a slice was refused. */
function answer(
  s: SlidingWindowState,
  now: number,
  m: Measured,
  granted: number,
  refused: boolean,
  req: WindowAcquireRequest,
): WindowGrant {
  return {
    granted,
    remaining: granted > 0 ? m.room - granted : Math.max(0, m.room),
    opensPerMs: s.previous / req.windowMs,
    window: s.window,
    msLeft: m.msLeft,
    // Leasing ahead, nothing more opens in this window: the next one starts with this count as its
    // previous.
    retryMs: !refused ? 0 : req.ahead ? m.msLeft : msUntilRoom(s, now, m.end, req),
    resetMs: resetIn(s.current + granted, s.previous, now, m.end, req.windowMs),
  };
}

/** Counts `granted` more in the current window of `s`. */
function counting<R>(
  s: SlidingWindowState,
  granted: number,
  m: Measured,
  req: WindowAcquireRequest,
  result: R,
): Transition<SlidingWindowState, R> {
  return {
    state: { window: s.window, current: s.current + granted, previous: s.previous },
    // The current count matters until the end of the next window (it is that window's `previous`).
    // Redis sets this once per window, when the window's first write rolls the counts over.
    ttlMs: Math.ceil(m.msLeft + req.windowMs),
    result,
  };
}

/**
 * The window a call at `now` counts in: a clock that went backwards stays in the stored window,
 * unless it lies more than one window ahead. Such a window was written under another window length
 * (a policy given a longer `window`, or two limiters giving one policy name different windows) or
 * before the clock went back by more than a window; read as one of this length it would end far in
 * the future, so its counts count in the window of `now` (`roll`).
 */
function indexAt(state: SlidingWindowState | undefined, now: number, windowMs: number): number {
  const index = Math.floor(now / windowMs);
  return state !== undefined && state.window === index + 1 ? state.window : index;
}

export function acquire(
  state: SlidingWindowState | undefined,
  now: number,
  req: WindowAcquireRequest,
): Transition<SlidingWindowState, WindowGrant> {
  // (After a clock that went backwards, the older count weighs more.)
  const s = roll(state, indexAt(state, now, req.windowMs));
  const m = measure(s, now, req);
  // Leasing ahead may take what opens before the window ends; each fixed window stays <= limit.
  const granted = grantFrom(reach(m, req), req.want, req.min);
  const result = answer(s, now, m, granted, granted === 0, req);
  if (granted === 0) return { state, ttlMs: 0, result };
  return counting(s, granted, m, req, result);
}

/** Counts `s` after a report for window `window`: the current and the previous window take one. */
function settle(s: SlidingWindowState, req: WindowSyncRequest): SlidingWindowState {
  if (req.window === s.window) {
    const current = settled(s.current, req);
    return current === undefined ? s : { ...s, current };
  }
  if (req.window === s.window - 1) {
    const previous = settled(s.previous, req);
    return previous === undefined ? s : { ...s, previous };
  }
  return s;
}

/**
 * One instance's dialogue with a window in one step: settle the usage it reports and the leased
 * tokens it hands back, then grant an allowance when the window is far from its limit, else a slice
 * as `acquire` does.
 *
 * Settling: `used` and `returned` go to window `req.window` while the state still counts it: to
 * the current count, or to the previous one (it is still weighed); older windows ignore them. A
 * report may take the estimate above the limit: the window then refuses until it has decayed.
 *
 * Over the limit (write-behind): an allowance is
 * `min(req.allowance, floor((room - limit / 2) / (2 * fleet)))` (`windowAllowanceFrom`),
 * granted only while the room (limit minus the estimate) is at least `limit / 2` and only where it
 * covers `max(1, min, want)`; every instance's allowance is replaced (not added to) at its next
 * sync and dies with its window. With `fleet` at least the number of instances N, each fixed window
 * admits at most `limit + (N - 1) * floor(limit / (4 * fleet))` (< 1.25 × limit), and the estimate
 * over the true counts (usage reported or not) stays under the same bound while slices do not lease
 * ahead; both are at most `limit` if no slice is granted while another instance holds an allowance
 * of that window. The argument is the fixed window's (`src/algorithms/fixedWindow.ts`), with the
 * estimate for the count: it only decays between grants. `test/unit/windowSync.test.ts` checks it.
 */
export function sync(
  state: SlidingWindowState | undefined,
  now: number,
  req: WindowSyncRequest,
): Transition<SlidingWindowState, WindowSyncResult> {
  const ask = { ...req, min: leaseMin(req) };
  const rolled = roll(state, indexAt(state, now, req.windowMs));
  const s = settle(rolled, req);
  const m = measure(s, now, ask);
  const allowance = windowAllowanceFrom(m.room, ask.limit, ask);
  const leasing = allowance === 0 && ask.want > 0;
  const granted = leasing ? grantFrom(reach(m, ask), ask.want, ask.min) : 0;
  const result = withAllowance(answer(s, now, m, granted, leasing && granted === 0, ask), allowance);
  // Nothing settled and nothing granted writes nothing.
  if (s === rolled && granted === 0) return { state, ttlMs: 0, result };
  return counting(s, granted, m, req, result);
}

/** What a request of cost 1 would see now, changing nothing (port: `lua/sliding_window_peek.lua`). */
export function peek(
  state: SlidingWindowState | undefined,
  now: number,
  req: WindowPeekRequest,
): Transition<SlidingWindowState, Estimate> {
  const s = roll(state, indexAt(state, now, req.windowMs));
  const m = measure(s, now, req);
  return unchanged(state, {
    remaining: m.room,
    resetMs: resetIn(s.current, s.previous, now, m.end, req.windowMs),
    retryMs:
      m.room >= 1 ? 0 : msUntilRoom(s, now, m.end, { limit: req.limit, windowMs: req.windowMs, min: 1 }),
  });
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
