/**
 * Engine of the windowed counters (fixed window, sliding window). A lease is a slice of the
 * current window's quota: the store counts the slice when it grants it, the instance spends it
 * locally, and unused tokens go back to the same window only. A slice dies when its window ends
 * (in the instance's clock, measured from before the store call, so never late), because tokens
 * counted in one window must not be spent in the next.
 *
 * Slices are sized to the instance's demand over the lease horizon (never more than it can spend
 * before the window ends), start at 1 for a new key and double (slow start), and are at most
 * `maxFraction` of the quota still left in the window, so they shrink to 1 as it runs out.
 * A sliding window at its limit keeps opening room as the previous window's weight decays; a slice
 * may reach ahead into that (counted at once, usable only as it opens — the token bucket's lease
 * segments), so a saturated key does not send every instance to the store for each token.
 * With `lease: 'exact'` every decision is one store call for exactly its cost.
 */
import { windowEnd, windowIndex, windowStart } from '../algorithms/fixedWindow.js';
import type { WindowAcquireRequest, WindowGrant, WindowReleaseRequest } from '../algorithms/window.js';
import type { Check, Decision } from '../decision.js';
import { type Demand, demandPerMs, noteDemand } from '../demand.js';
import * as lease from '../lease.js';
import type { ReturnReason } from '../observe/events.js';
import type { WindowRule } from '../policy.js';
import type { Operation, RunOptions } from '../stores/store.js';
import {
  fixedWindowAcquire,
  fixedWindowRelease,
  slidingWindowAcquire,
  slidingWindowRelease,
} from '../stores/windowOps.js';
import {
  BACKGROUND,
  backgroundCall,
  type Consumed,
  type Engine,
  type EngineContext,
  handBack,
  handBackWhenServed,
  type KeyState,
  MAX_ATTEMPTS,
  refunded,
  retryAfter,
  seconds,
  storeCall,
} from './engine.js';

interface WindowAlgorithm {
  readonly acquire: Operation<unknown, WindowAcquireRequest, WindowGrant>;
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
    release: fixedWindowRelease as WindowAlgorithm['release'],
    carriesOver: false,
  },
  'sliding-window': {
    acquire: slidingWindowAcquire as WindowAlgorithm['acquire'],
    release: slidingWindowRelease as WindowAlgorithm['release'],
    carriesOver: true,
  },
};

// Leftovers below this are rounding, not tokens worth a store call.
const EPSILON = 1e-9;

/** The tokens held for one window: lease segments (see `src/lease.ts`) and when the window ends. */
interface Slice {
  readonly window: number;
  /** Local time the window ends (computed from before the grant's store call: never late). */
  readonly endsAt: number;
  segments: lease.Segment[];
  /** Local time after which unused tokens are handed back. */
  expiresAt: number;
}

class WindowKey implements KeyState {
  readonly #algorithm: WindowAlgorithm;
  slice: Slice | undefined;
  readonly #demand: Demand;
  #lastGrant = 0;
  /** The store refused `#deniedCost` tokens until this local time. */
  #deniedUntil = 0;
  /**
   * When the store said the refused cost fits (what a refusal reports); the instance may look again
   * sooner (`#deniedUntil`), since peers hand unused slices back.
   */
  #retryAt = 0;
  #deniedCost = 0;
  /** What the last store reply said, in local time. */
  #remaining: number;
  #opensPerMs = 0;
  #windowEndsAt = Number.NEGATIVE_INFINITY;
  /** Index of the window the last store reply was about. */
  #window = 0;
  #resetAt = Number.NEGATIVE_INFINITY;
  #inflight: Promise<void> | undefined;

  constructor(
    private readonly ctx: EngineContext,
    readonly rule: WindowRule,
    readonly key: string,
    readonly storageKey: string,
  ) {
    this.#algorithm = ALGORITHMS[rule.algorithm];
    this.#demand = { sum: 0, at: ctx.now() };
    this.#remaining = rule.limit;
  }

  async consume(cost: number, check?: Check): Promise<Consumed> {
    const { ctx, rule } = this;
    noteDemand(this.#demand, ctx.now(), cost);
    const answer = (storeWaits: number, decision: Decision) => ctx.answer(storeWaits, cost, check, decision);
    if (cost > rule.limit) {
      return { decision: answer(0, this.#decision(ctx.now(), false, Number.POSITIVE_INFINITY)) };
    }
    if (rule.exact) return this.#consumeExact(cost, check);
    for (let attempt = 0; ; attempt++) {
      const now = ctx.now();
      this.#expire(now);
      const slice = this.slice;
      if (slice && lease.take(slice.segments, now, cost)) {
        this.#refillAhead(now);
        const decision = answer(attempt, this.#decision(now, true, 0));
        return { decision, refund: () => this.#refund(slice.window, cost, decision) };
      }
      // Tokens leased ahead open later in this window: until then there is no room anywhere (and
      // what opens only as the window ends waits for the next window).
      const wait = slice ? lease.msUntilAvailable(slice.segments, now, cost) : Number.POSITIVE_INFINITY;
      if (slice && Number.isFinite(wait)) {
        return { decision: answer(attempt, this.#decision(now, false, Math.min(wait, slice.endsAt - now))) };
      }
      if (now < this.#deniedUntil && cost >= this.#deniedCost) {
        return { decision: answer(attempt, this.#decision(now, false, this.#retryAt - now)) };
      }
      // Peers kept taking what this instance acquired: let the caller come back shortly.
      if (attempt === MAX_ATTEMPTS) return { decision: answer(attempt, this.#decision(now, false, 1)) };
      await this.#acquire(cost - (slice ? lease.unused(slice.segments) : 0));
    }
  }

  /** The lease hit without a promise: a slice of the current window covers `cost` right now. */
  consumeLocal(cost: number, check?: Check): Consumed | undefined {
    const slice = this.slice;
    const decision = this.#decideLocal(cost, check);
    if (decision === undefined || slice === undefined) return undefined;
    return { decision, refund: () => this.#refund(slice.window, cost, decision) };
  }

  decideLocal(cost: number, check?: Check): Decision | undefined {
    return this.#decideLocal(cost, check);
  }

  #decideLocal(cost: number, check: Check | undefined): Decision | undefined {
    const { ctx, rule } = this;
    const slice = this.slice;
    if (rule.exact || slice === undefined) return undefined;
    const now = ctx.now();
    // Expiry, hand-backs and the window's end are left to `consume`.
    if (now >= slice.endsAt || now >= slice.expiresAt || !lease.take(slice.segments, now, cost))
      return undefined;
    noteDemand(this.#demand, now, cost);
    this.#refillAhead(now);
    return ctx.answer(0, cost, check, this.#decision(now, true, 0));
  }

  async #consumeExact(cost: number, check: Check | undefined): Promise<Consumed> {
    const { ctx, rule } = this;
    const sentAt = ctx.now();
    if (sentAt < this.#deniedUntil && cost >= this.#deniedCost) {
      return {
        decision: ctx.answer(0, cost, check, this.#decision(sentAt, false, this.#deniedUntil - sentAt)),
      };
    }
    const request = {
      limit: rule.limit,
      windowMs: rule.windowMs,
      want: cost,
      min: cost,
      ahead: false,
      firstHit: rule.firstHit,
    };
    const result = await storeCall(this.ctx, this.#algorithm.acquire, this.storageKey, request);
    this.#learn(result, sentAt);
    const now = ctx.now();
    if (result.granted > 0) {
      const decision = ctx.answer(1, cost, check, this.#decision(now, true, 0));
      return { decision, refund: () => this.#refund(result.window, cost, decision) };
    }
    this.#deniedUntil = sentAt + result.retryMs;
    this.#retryAt = this.#deniedUntil;
    this.#deniedCost = cost;
    return { decision: ctx.answer(1, cost, check, this.#decision(now, false, this.#deniedUntil - now)) };
  }

  /** Drops (or hands back) the slice of a window that ended, and hands back one whose time is up. */
  #expire(now: number): void {
    const slice = this.slice;
    if (!slice) return;
    if (now >= slice.endsAt) {
      if (this.#algorithm.carriesOver) this.returnUnused('expired');
      else this.slice = undefined;
    } else if (now >= slice.expiresAt && !this.#inflight) {
      this.returnUnused('expired');
    }
  }

  /**
   * Starts the next slice before this one runs out — only when this instance expects another
   * request before the window ends: a token fetched ahead for a quiet instance would sit there
   * while busier ones are refused, and die with its window.
   */
  #refillAhead(now: number): void {
    if (this.#inflight || now < this.#deniedUntil) return;
    if (this.slice && lease.unused(this.slice.segments) > Math.ceil(this.#lastGrant / 4)) return;
    if (this.#extra(now) < 1) return;
    this.#acquire(1, BACKGROUND).catch(() => {});
  }

  /** Single-flight: concurrent misses for one key share one store call. */
  #acquire(min: number, options: RunOptions = {}): Promise<void> {
    if (this.#inflight) return this.#inflight;
    const { ctx, rule } = this;
    const want = this.#leaseSize(min);
    const sentAt = ctx.now();
    // Only an instance expecting more requests takes tokens that open later (for the request at
    // hand alone they would come too late), and not in the window's last horizon: what opens
    // then is usable only by whoever happens to ask in time, and is lost when the window ends.
    const request = {
      limit: rule.limit,
      windowMs: rule.windowMs,
      want,
      min: Math.min(min, want),
      ahead: want > min && this.#windowEndsAt - sentAt > rule.horizonMs,
      firstHit: rule.firstHit,
    };
    const call = storeCall(ctx, this.#algorithm.acquire, this.storageKey, request, options)
      .then((result) => {
        this.#learn(result, sentAt);
        if (result.granted === 0) {
          // Peers hand unused slices back within a lease time: look again by then at the latest.
          this.#deniedUntil = sentAt + Math.min(result.retryMs, rule.leaseTtlMs);
          // The client hears when the store says the cost fits, not when this instance looks again.
          this.#retryAt = sentAt + result.retryMs;
          this.#deniedCost = request.min;
          return;
        }
        ctx.stats.leasesGranted++;
        ctx.stats.tokensLeased += result.granted;
        ctx.telemetry.leaseGranted(rule.name, this.key, result.granted);
        this.#lastGrant = result.granted;
        this.#deniedUntil = 0;
        const now = ctx.now();
        const segment = {
          at: now,
          // Where this grant starts in the queue of tokens opening in the window.
          levelBefore: result.remaining + result.granted,
          size: result.granted,
          ratePerMs: result.opensPerMs,
          used: 0,
        };
        if (this.slice?.window !== result.window) {
          if (this.slice) this.returnUnused('expired');
          this.slice = { window: result.window, endsAt: sentAt + result.msLeft, segments: [], expiresAt: 0 };
        }
        this.slice.segments.push(segment);
        this.slice.expiresAt = now + rule.leaseTtlMs;
        // Evicted or closed while the call was in flight: the requests waiting for this call are
        // served first (their continuations run before the immediate), then the rest goes back.
        if (ctx.peek(this.storageKey) !== this) handBackWhenServed(ctx, this);
      })
      .finally(() => {
        this.#inflight = undefined;
      });
    this.#inflight = call;
    ctx.track(call);
    return call;
  }

  /** Slice size: what is waiting, plus what `#extra` allows. */
  #leaseSize(min: number): number {
    return Math.max(min, this.#extra(this.ctx.now()));
  }

  /**
   * Tokens worth holding beyond the request at hand: this instance's demand over the horizon (never
   * more than it can spend before the window ends), doubling from 1 for a new key, and at most
   * `maxFraction` of what is left in the window (now or opening before its end). Near the end of
   * the quota that is below one token: then every decision is exact and nothing sits idle at an
   * instance while others are refused (a token left over when a window ends is lost).
   */
  #extra(now: number): number {
    const { rule } = this;
    const inWindow = now < this.#windowEndsAt;
    const horizon = inWindow ? Math.min(rule.horizonMs, this.#windowEndsAt - now) : rule.horizonMs;
    const demand = Math.floor(demandPerMs(this.#demand, now) * horizon);
    const slowStart = Math.max(1, this.#lastGrant * 2);
    const left =
      inWindow || this.#algorithm.carriesOver ? this.#remaining + this.#opensPerMs * horizon : rule.limit;
    return Math.min(Math.floor(left * rule.maxFraction), slowStart, demand);
  }

  #learn(result: WindowGrant, sentAt: number): void {
    this.#window = result.window;
    this.#remaining = result.remaining;
    this.#opensPerMs = result.opensPerMs;
    this.#windowEndsAt = sentAt + result.msLeft;
    this.#resetAt = sentAt + result.resetMs;
  }

  returnUnused(reason: ReturnReason): void {
    const slice = this.slice;
    this.slice = undefined;
    if (!slice) return;
    const tokens = lease.unused(slice.segments);
    if (tokens <= EPSILON) return;
    const request = { windowMs: this.rule.windowMs, window: slice.window, tokens };
    const returned = { policy: this.rule.name, key: this.key, tokens, reason };
    handBack(this.ctx, this.#algorithm.release, this.storageKey, request, returned);
  }

  #release(window: number, tokens: number): void {
    const request = { windowMs: this.rule.windowMs, window, tokens };
    backgroundCall(this.ctx, this.#algorithm.release, this.storageKey, request);
  }

  sweep(now: number): boolean {
    if (this.#inflight) return false;
    this.#expire(now);
    return (
      this.slice === undefined && now >= this.#deniedUntil && demandPerMs(this.#demand, now) * 1000 < 0.01
    );
  }

  async refund(cost: number): Promise<void> {
    const { ctx, rule } = this;
    // The refused cost may fit now.
    this.#deniedUntil = 0;
    const now = ctx.now();
    const slice = this.slice;
    if (slice && now < slice.endsAt) {
      lease.refund(slice.segments, now, cost);
      return;
    }
    const window = now < this.#windowEndsAt ? this.#window : windowIndex(now, rule.windowMs);
    await storeCall(ctx, this.#algorithm.release, this.storageKey, {
      windowMs: rule.windowMs,
      window,
      tokens: cost,
    });
  }

  /** Puts back tokens of a multi-rule check refused elsewhere: into the local slice, else the store. */
  #refund(window: number, cost: number, decision: Decision): Decision {
    const current = this.ctx.peek(this.storageKey);
    const slice = current instanceof WindowKey ? current.slice : undefined;
    const now = this.ctx.now();
    if (slice && slice.window === window && now < slice.endsAt) lease.refund(slice.segments, now, cost);
    else this.#release(window, cost);
    return refunded(decision, cost);
  }

  #decision(now: number, allowed: boolean, retryAfterMs: number): Decision {
    const { rule } = this;
    const known = now < this.#windowEndsAt || this.#algorithm.carriesOver ? this.#remaining : rule.limit;
    const estimate = known + (this.slice ? lease.available(this.slice.segments, now) : 0);
    return {
      allowed,
      policy: rule.name,
      key: this.key,
      limit: rule.limit,
      remaining: Math.max(0, Math.min(rule.limit, Math.floor(estimate))),
      resetMs: Math.max(0, Math.ceil(this.#resetAt - now)),
      retryAfterMs: allowed ? 0 : retryAfter(retryAfterMs),
    };
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
