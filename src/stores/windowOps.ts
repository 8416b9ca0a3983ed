import type { Estimate } from '../algorithms/estimate.js';
import * as fixed from '../algorithms/fixedWindow.js';
import * as sliding from '../algorithms/slidingWindow.js';
import {
  type WindowAcquireRequest,
  type WindowGrant,
  type WindowPeekRequest,
  type WindowReleaseRequest,
  type WindowSyncRequest,
  type WindowSyncResult,
  withAllowance,
} from '../algorithms/window.js';
import { parseEstimate, replyArray, replyNumber } from './reply.js';
import type { Operation } from './store.js';

function grantOf(r: unknown[], script: string): WindowGrant {
  return {
    granted: replyNumber(r[0], 'granted', script),
    remaining: replyNumber(r[1], 'remaining', script),
    opensPerMs: replyNumber(r[2], 'opensPerMs', script),
    window: replyNumber(r[3], 'window', script),
    msLeft: replyNumber(r[4], 'msLeft', script),
    retryMs: replyNumber(r[5], 'retryMs', script),
    resetMs: replyNumber(r[6], 'resetMs', script),
  };
}

function parseGrant(script: string) {
  return (reply: unknown): WindowGrant => grantOf(replyArray(reply, 7, script), script);
}

/** A sync replies as an acquisition, with the allowance after it. */
function parseSync(script: string) {
  return (reply: unknown): WindowSyncResult => {
    const r = replyArray(reply, 8, script);
    return withAllowance(grantOf(r, script), replyNumber(r[7], 'allowance', script));
  };
}

// Both scripts share one layout; the fixed window (which never leases ahead) uses the fifth slot
// for its anchor.
const acquireArgs = (r: WindowAcquireRequest) => [r.limit, r.windowMs, r.want, r.min, r.ahead ? 1 : 0];
const fixedAcquireArgs = (r: WindowAcquireRequest) => [
  r.limit,
  r.windowMs,
  r.want,
  r.min,
  r.firstHit ? 1 : 0,
];
const releaseArgs = (r: WindowReleaseRequest) => [r.window, r.tokens];
// A sync's arguments are its acquisition's, then the report and the allowance asked for.
const reportArgs = (r: WindowSyncRequest) => [r.used, r.returned, r.window, r.allowance, r.fleet];

export const fixedWindowAcquire: Operation<fixed.FixedWindowState, WindowAcquireRequest, WindowGrant> = {
  script: 'fixed_window_acquire',
  apply: fixed.acquire,
  args: fixedAcquireArgs,
  parse: parseGrant('fixed_window_acquire'),
};

export const fixedWindowRelease: Operation<fixed.FixedWindowState, WindowReleaseRequest, null> = {
  script: 'fixed_window_release',
  apply: fixed.release,
  args: releaseArgs,
  parse: () => null,
};

export const slidingWindowAcquire: Operation<sliding.SlidingWindowState, WindowAcquireRequest, WindowGrant> =
  {
    script: 'sliding_window_acquire',
    apply: sliding.acquire,
    args: acquireArgs,
    parse: parseGrant('sliding_window_acquire'),
  };

export const slidingWindowRelease: Operation<sliding.SlidingWindowState, WindowReleaseRequest, null> = {
  script: 'sliding_window_release',
  apply: sliding.release,
  args: releaseArgs,
  parse: () => null,
};

export const fixedWindowSync: Operation<fixed.FixedWindowState, WindowSyncRequest, WindowSyncResult> = {
  script: 'fixed_window_sync',
  apply: fixed.sync,
  args: (r) => [...fixedAcquireArgs(r), ...reportArgs(r)],
  parse: parseSync('fixed_window_sync'),
};

export const slidingWindowSync: Operation<sliding.SlidingWindowState, WindowSyncRequest, WindowSyncResult> = {
  script: 'sliding_window_sync',
  apply: sliding.sync,
  args: (r) => [...acquireArgs(r), ...reportArgs(r)],
  parse: parseSync('sliding_window_sync'),
};

/** Reads what a request of cost 1 would see (`Limiter.peek`); writes nothing. */
export const fixedWindowPeek: Operation<fixed.FixedWindowState, WindowPeekRequest, Estimate> = {
  script: 'fixed_window_peek',
  apply: fixed.peek,
  args: (r) => [r.limit, r.windowMs, r.firstHit ? 1 : 0],
  parse: parseEstimate('fixed_window_peek'),
};

/** Reads what a request of cost 1 would see (`Limiter.peek`); writes nothing. */
export const slidingWindowPeek: Operation<sliding.SlidingWindowState, WindowPeekRequest, Estimate> = {
  script: 'sliding_window_peek',
  apply: sliding.peek,
  args: (r) => [r.limit, r.windowMs],
  parse: parseEstimate('sliding_window_peek'),
};
