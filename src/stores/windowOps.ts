import * as fixed from '../algorithms/fixedWindow.js';
import * as sliding from '../algorithms/slidingWindow.js';
import type { WindowAcquireRequest, WindowGrant, WindowReleaseRequest } from '../algorithms/window.js';
import { replyArray, replyNumber } from './reply.js';
import type { Operation } from './store.js';

function parseGrant(script: string) {
  return (reply: unknown): WindowGrant => {
    const r = replyArray(reply, 7, script);
    return {
      granted: replyNumber(r[0], 'granted', script),
      remaining: replyNumber(r[1], 'remaining', script),
      opensPerMs: replyNumber(r[2], 'opensPerMs', script),
      window: replyNumber(r[3], 'window', script),
      msLeft: replyNumber(r[4], 'msLeft', script),
      retryMs: replyNumber(r[5], 'retryMs', script),
      resetMs: replyNumber(r[6], 'resetMs', script),
    };
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
