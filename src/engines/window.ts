/**
 * Windowed counters (fixed window, sliding window) on the lease core (`leasedKey.ts`). A lease is
 * a slice of the current window's quota: the store counts the slice when it grants it, the
 * instance spends it locally, and unused tokens go back to the same window only. A slice dies when
 * its window ends (in the instance's clock, measured from before the store call, so never late),
 * because tokens counted in one window must not be spent in the next.
 *
 * Slices are at most `maxFraction` of the quota still left in the window (now or opening before its
 * end), so they shrink to nothing near the limit, where every decision goes to the store; demand
 * is counted only up to the window's end. A sliding window at its limit keeps opening room as the
 * previous window's weight decays; a slice may reach ahead into that (counted at once, usable only
 * as it opens), so a saturated key does not send every instance to the store for each token.
 */
import { windowEnd, windowIndex, windowStart } from '../algorithms/fixedWindow.js';
import type {
  WindowAcquireRequest,
  WindowGrant,
  WindowReleaseRequest,
  WindowSyncRequest,
  WindowSyncResult,
} from '../algorithms/window.js';
import type { WindowRule } from '../policy.js';
import type { Operation } from '../stores/store.js';
import {
  fixedWindowAcquire,
  fixedWindowRelease,
  fixedWindowSync,
  slidingWindowAcquire,
  slidingWindowRelease,
  slidingWindowSync,
} from '../stores/windowOps.js';
import { type Engine, type EngineContext, seconds } from './engine.js';
import { LeasedKey } from './leasedKey.js';
import type { Grant, StoreRequest, SyncParams } from './leaseStrategy.js';

interface WindowAlgorithm {
  /** An exact decision. */
  readonly acquire: Operation<unknown, WindowAcquireRequest, WindowGrant>;
  /** Reports, hand-backs, slices and allowances. */
  readonly sync: Operation<unknown, WindowSyncRequest, WindowSyncResult>;
  readonly release: Operation<unknown, WindowReleaseRequest, null>;
  /**
   * Whether a window's count still matters during the next window (the sliding window weighs it),
   * so unused tokens are worth handing back after their window ended, and the known remaining
   * quota carries over; a fixed window starts from zero.
   */
  readonly carriesOver: boolean;
}

const ALGORITHMS: Record<WindowRule['algorithm'], WindowAlgorithm> = {
  'fixed-window': {
    acquire: fixedWindowAcquire as WindowAlgorithm['acquire'],
    sync: fixedWindowSync as WindowAlgorithm['sync'],
    release: fixedWindowRelease as WindowAlgorithm['release'],
    carriesOver: false,
  },
  'sliding-window': {
    acquire: slidingWindowAcquire as WindowAlgorithm['acquire'],
    sync: slidingWindowSync as WindowAlgorithm['sync'],
    release: slidingWindowRelease as WindowAlgorithm['release'],
    carriesOver: true,
  },
};

/** A window's key state: the lease core and, as its strategy, what the store last said of the window. */
class WindowKey extends LeasedKey<WindowGrant | WindowSyncResult> {
  declare readonly rule: WindowRule;
  readonly #algorithm: WindowAlgorithm;
  /** What the last store reply said, in local time (numbers from the start: see `LeasedKey.demandSum`). */
  #remaining = 0;
  #opensPerMs = 0;
  #windowEndsAt = Number.NEGATIVE_INFINITY;
  /** Index of the window the last store reply was about. */
  #window = 0;
  #resetAt = Number.NEGATIVE_INFINITY;

  constructor(ctx: EngineContext, rule: WindowRule, key: string, storageKey: string) {
    super(ctx, rule, key, storageKey);
    this.#algorithm = ALGORITHMS[rule.algorithm];
    this.#remaining = rule.limit;
  }

  // Read from the rule, not kept per key: the rule is shared and in cache.
  override get limit(): number {
    return this.rule.limit;
  }

  /** A slice is sized by the quota left (`cap`), not by a fixed most. */
  get maxLease(): number {
    return this.rule.limit;
  }

  /** Usage names its window, which only the store's first reply tells. */
  get firstSight(): boolean {
    return false;
  }

  get carriesOver(): boolean {
    return this.#algorithm.carriesOver;
  }

  sync(p: SyncParams): StoreRequest<WindowGrant | WindowSyncResult> {
    const { rule } = this;
    // Not in the window's last horizon: what opens then is usable only by whoever happens to ask
    // in time, and is lost when the window ends.
    const ahead = p.reachAhead && this.#windowEndsAt - p.sentAt > rule.horizonMs;
    const { limit, windowMs, firstHit } = rule;
    if (p.exact) {
      return {
        op: this.#algorithm.acquire,
        req: { limit, windowMs, want: p.want, min: p.min, ahead, firstHit },
      };
    }
    // One literal, not spreads of the acquisition and the report (see `decisionWith` in src/decision.ts).
    const req = {
      limit,
      windowMs,
      want: p.want,
      min: p.min,
      ahead,
      firstHit,
      used: p.used,
      returned: p.returned,
      window: p.window,
      allowance: p.allowance ? limit : 0,
      fleet: p.fleet,
    };
    return { op: this.#algorithm.sync, req };
  }

  learn(result: WindowGrant | WindowSyncResult, p: SyncParams): Grant {
    this.#window = result.window;
    this.#remaining = result.remaining;
    this.#opensPerMs = result.opensPerMs;
    this.#windowEndsAt = p.sentAt + result.msLeft;
    this.#resetAt = p.sentAt + result.resetMs;
    return {
      granted: result.granted,
      allowance: 'allowance' in result ? result.allowance : 0,
      // Where this grant starts in the queue of tokens opening in the window.
      levelBefore: result.remaining + result.granted,
      opensPerMs: result.opensPerMs,
      window: result.window,
      endsAt: this.#windowEndsAt,
      retryAt: p.sentAt + result.retryMs,
    };
  }

  release(window: number, tokens: number): StoreRequest<null> {
    return { op: this.#algorithm.release, req: { windowMs: this.rule.windowMs, window, tokens } };
  }

  /**
   * `maxFraction` of what is left in the window (now or opening before its end). Near the end of
   * the quota that is below one token: then every decision is exact and nothing sits idle at an
   * instance while others are refused (a token left over when a window ends is lost).
   */
  cap(now: number): number {
    const { rule } = this;
    const inWindow = now < this.#windowEndsAt;
    const left =
      inWindow || this.carriesOver ? this.#remaining + this.#opensPerMs * this.horizon(now) : rule.limit;
    return Math.floor(left * rule.maxFraction);
  }

  /** Demand counts only up to the window's end: what a slice holds beyond it is lost. */
  horizon(now: number): number {
    const { rule } = this;
    return now < this.#windowEndsAt ? Math.min(rule.horizonMs, this.#windowEndsAt - now) : rule.horizonMs;
  }

  remaining(now: number): number {
    return now < this.#windowEndsAt || this.carriesOver ? this.#remaining : this.rule.limit;
  }

  override resetMs(now: number, remaining: number): number {
    const stored = Math.max(0, Math.ceil(this.#resetAt - now));
    // Less left than the store's reply says: usage admitted within an allowance and not reported
    // yet, which counts in this window (and, for a sliding window, weighs through the next one).
    if (now >= this.#windowEndsAt || remaining >= Math.floor(this.remaining(now))) return stored;
    const counted = this.#windowEndsAt + (this.carriesOver ? this.rule.windowMs : 0);
    return Math.max(stored, Math.ceil(counted - now));
  }

  refundWindow(now: number): number {
    return now < this.#windowEndsAt ? this.#window : windowIndex(now, this.rule.windowMs);
  }

  /** Peers kept taking what this instance acquired: the caller may come back shortly. */
  contentionRetryMs(): number {
    return 1;
  }
}

export const windowEngine: Engine<WindowRule> = {
  open: (ctx, rule, key, storageKey) => new WindowKey(ctx, rule, key, storageKey),
  methods: ['consume'],
  describe(rule, now) {
    // A calendar month is as long as the one `now` is in.
    const index = windowIndex(now, rule.windowMs);
    return {
      limit: rule.limit,
      windowSeconds: seconds(windowEnd(index, rule.windowMs) - windowStart(index, rule.windowMs)),
    };
  },
};
