/**
 * Token bucket engine: leases segments of the shared bucket (see `src/lease.ts`), sized to demand,
 * refilled ahead in the background, handed back on expiry; `lease: 'exact'` asks the store for
 * every decision.
 */
import { msUntilRoom } from '../algorithms/tokenBucket.js';
import type { Check, Decision } from '../decision.js';
import { type Demand, demandPerMs, noteDemand } from '../demand.js';
import { StoreUnavailableError } from '../errors.js';
import * as lease from '../lease.js';
import type { ReturnReason } from '../observe/events.js';
import type { TokenBucketRule } from '../policy.js';
import type { RunOptions } from '../stores/store.js';
import { tokenBucketAcquire, tokenBucketRelease } from '../stores/tokenBucketOps.js';
import {
  BACKGROUND,
  type Consumed,
  type Engine,
  type EngineContext,
  handBack,
  type KeyState,
  MAX_ATTEMPTS,
  seconds,
  storeCall,
} from './engine.js';

class TokenBucketKey implements KeyState {
  segments: lease.Segment[] = [];
  /** Local time after which unused tokens are handed back. */
  expiresAt = 0;
  readonly demand: Demand;
  lastGrant = 0;
  /** The store refused `deniedCost` tokens until this local time. */
  deniedUntil = 0;
  deniedCost = 0;
  /** Last known global level after our grant, and when we learned it. */
  level: number;
  levelAt: number;
  inflight: Promise<void> | undefined;

  constructor(
    private readonly ctx: EngineContext,
    readonly rule: TokenBucketRule,
    readonly key: string,
    readonly storageKey: string,
  ) {
    this.demand = { sum: 0, at: ctx.now() };
    this.level = rule.burst;
    this.levelAt = ctx.now();
  }

  async consume(cost: number, check?: Check): Promise<Consumed> {
    return this.#consumed(await this.#consume(cost, check), cost);
  }

  /**
   * The lease hit without a promise: answers when tokens this instance holds cover `cost` right now,
   * else leaves the request to `consume` (nothing changed).
   */
  consumeLocal(cost: number, check?: Check): Consumed | undefined {
    const { ctx, rule } = this;
    if (rule.exact || cost > rule.maxLease || this.segments.length === 0) return undefined;
    const now = ctx.now();
    if (now >= this.expiresAt || !lease.take(this.segments, now, cost)) return undefined;
    noteDemand(this.demand, now, cost);
    this.#refillAhead(now);
    return this.#consumed(ctx.answer(0, cost, check, this.#allow(now)), cost);
  }

  #consumed(decision: Decision, cost: number): Consumed {
    if (!decision.allowed) return { decision };
    const refund = () => {
      this.#refund(cost);
      const remaining = Math.min(decision.limit, decision.remaining + cost);
      return {
        ...decision,
        remaining,
        resetMs: Math.ceil((this.rule.burst - remaining) / this.rule.ratePerMs),
      };
    };
    return { decision, refund };
  }

  async #consume(cost: number, check: Check | undefined): Promise<Decision> {
    const { ctx, rule } = this;
    noteDemand(this.demand, ctx.now(), cost);
    if (cost > rule.burst) {
      return ctx.answer(0, cost, check, this.#deny(ctx.now(), Number.POSITIVE_INFINITY));
    }
    if (rule.exact) return this.#consumeExact(cost, check);
    // A cost no lease can cover is decided by the store, with what this instance holds handed back
    // first (the return is queued ahead of the call): partial leases kept for it would sit idle.
    if (cost > rule.maxLease) {
      // A lease still in flight would land after the return and sit idle: wait for it first.
      if (this.inflight) await this.inflight.catch(() => {});
      this.returnUnused('oversized');
      return this.#consumeExact(cost, check);
    }
    for (let attempt = 0; ; attempt++) {
      const now = ctx.now();
      if (this.segments.length > 0 && now >= this.expiresAt && !this.inflight) this.returnUnused('expired');
      if (lease.take(this.segments, now, cost)) {
        this.#refillAhead(now);
        return ctx.answer(attempt, cost, check, this.#allow(now));
      }
      // Tokens already reserved for us exist later: the shared bucket is empty until then.
      const wait = lease.msUntilAvailable(this.segments, now, cost);
      if (Number.isFinite(wait)) return ctx.answer(attempt, cost, check, this.#deny(now, wait));
      if (now < this.deniedUntil && cost >= this.deniedCost) {
        return ctx.answer(attempt, cost, check, this.#deny(now, this.deniedUntil - now));
      }
      if (attempt === MAX_ATTEMPTS) {
        return ctx.answer(attempt, cost, check, this.#deny(now, cost / rule.ratePerMs));
      }
      const acquired = this.#acquire(cost - lease.unused(this.segments));
      // While the store is suspended no request waits on it: the call is at most a probe, and its
      // lease (if the store is back) serves the requests that come after it.
      if (ctx.suspended(this.storageKey)) {
        acquired.catch(() => {});
        throw new StoreUnavailableError('Store calls for this key are suspended');
      }
      await acquired;
    }
  }

  /** Exact mode: one store call per decision, nothing held locally but the deny cache. */
  async #consumeExact(cost: number, check: Check | undefined): Promise<Decision> {
    const { ctx, rule } = this;
    const now = ctx.now();
    if (now < this.deniedUntil && cost >= this.deniedCost) {
      return ctx.answer(0, cost, check, this.#deny(now, this.deniedUntil - now));
    }
    const request = {
      rate: rule.rate,
      periodMs: rule.periodMs,
      burst: rule.burst,
      want: cost,
      min: cost,
      ahead: 0,
    };
    const result = await storeCall(ctx, tokenBucketAcquire, this.storageKey, request);
    const at = ctx.now();
    this.level = result.levelBefore - result.granted;
    this.levelAt = at;
    if (result.granted > 0) return ctx.answer(1, cost, check, this.#allow(at));
    this.deniedUntil = at + msUntilRoom(result.levelBefore, request);
    this.deniedCost = cost;
    return ctx.answer(1, cost, check, this.#deny(at, this.deniedUntil - at));
  }

  /** Starts the next lease before this one runs out, so the hot path rarely waits on the store. */
  #refillAhead(now: number): void {
    if (this.rule.exact || this.inflight || now < this.deniedUntil) return;
    if (lease.unused(this.segments) > Math.ceil(this.lastGrant / 4)) return;
    // A key this instance rarely sees would hold the fetched tokens idle until they expire.
    if (demandPerMs(this.demand, now) * this.rule.horizonMs < 1) return;
    this.#acquire(1, BACKGROUND).catch(() => {});
  }

  /** Single-flight: concurrent misses for one key share one store call. */
  #acquire(min: number, options: RunOptions = {}): Promise<void> {
    if (this.inflight) return this.inflight;
    const { ctx, rule } = this;
    const want = this.#leaseSize(min);
    const request = {
      rate: rule.rate,
      periodMs: rule.periodMs,
      burst: rule.burst,
      want,
      min: Math.min(min, want),
      ahead: rule.ahead,
    };
    const call = storeCall(ctx, tokenBucketAcquire, this.storageKey, request, options)
      .then((result) => {
        const now = ctx.now();
        this.level = result.levelBefore - result.granted;
        this.levelAt = now;
        if (result.granted === 0) {
          this.deniedUntil = now + msUntilRoom(result.levelBefore, request);
          this.deniedCost = request.min;
          return;
        }
        ctx.stats.leasesGranted++;
        ctx.stats.tokensLeased += result.granted;
        ctx.telemetry.leaseGranted(rule.name, this.key, result.granted);
        this.lastGrant = result.granted;
        this.deniedUntil = 0;
        this.segments.push({
          at: now,
          levelBefore: result.levelBefore,
          size: result.granted,
          ratePerMs: rule.ratePerMs,
          used: 0,
        });
        this.expiresAt = lease.fullyCoveredAt(this.segments) + rule.leaseTtlMs;
        // Evicted or closed while the call was in flight: nobody will spend these tokens.
        if (ctx.peek(this.storageKey) !== this) this.returnUnused('orphaned');
      })
      .finally(() => {
        this.inflight = undefined;
      });
    this.inflight = call;
    ctx.track(call);
    return call;
  }

  /**
   * Lease size: this instance's demand over the horizon, doubling from 1 for a key without history
   * (slow start), at most `maxLease` (about 10 % of the limit), and never below what is waiting.
   */
  #leaseSize(min: number): number {
    const { rule } = this;
    if (rule.exact) return min;
    const demand = Math.ceil(demandPerMs(this.demand, this.ctx.now()) * rule.horizonMs);
    const slowStart = Math.max(1, this.lastGrant * 2);
    return Math.max(min, Math.min(rule.maxLease, slowStart, Math.max(1, demand)));
  }

  returnUnused(reason: ReturnReason): void {
    const tokens = lease.unused(this.segments);
    this.segments = [];
    if (tokens <= 0) return;
    const { ctx, rule } = this;
    const request = { rate: rule.rate, periodMs: rule.periodMs, burst: rule.burst, tokens };
    handBack(ctx, tokenBucketRelease, this.storageKey, request, {
      policy: rule.name,
      key: this.key,
      tokens,
      reason,
    });
  }

  sweep(now: number): boolean {
    if (this.inflight) return false;
    if (this.segments.length > 0 && now >= this.expiresAt) this.returnUnused('expired');
    // An idle entry holds nothing worth keeping once its demand has decayed.
    return (
      this.segments.length === 0 && now >= this.deniedUntil && demandPerMs(this.demand, now) * 1000 < 0.01
    );
  }

  async refund(cost: number): Promise<void> {
    const { ctx, rule } = this;
    // The refused cost may fit now.
    this.deniedUntil = 0;
    if (!rule.exact && this.segments.length > 0) {
      lease.refund(this.segments, ctx.now(), cost);
      return;
    }
    const request = { rate: rule.rate, periodMs: rule.periodMs, burst: rule.burst, tokens: cost };
    await storeCall(ctx, tokenBucketRelease, this.storageKey, request);
  }

  /** Puts back tokens of a multi-rule check refused elsewhere, into whatever state holds the key now. */
  #refund(cost: number): void {
    const current = this.ctx.peek(this.storageKey);
    if (current instanceof TokenBucketKey) lease.refund(current.segments, this.ctx.now(), cost);
  }

  #globalLevel(now: number): number {
    const { rule } = this;
    return Math.min(rule.burst, this.level + Math.max(0, now - this.levelAt) * rule.ratePerMs);
  }

  #decision(now: number, allowed: boolean, retryAfterMs: number): Decision {
    const { rule } = this;
    const estimate = this.#globalLevel(now) + lease.available(this.segments, now);
    const remaining = Math.max(0, Math.min(rule.burst, Math.floor(estimate)));
    return {
      allowed,
      policy: rule.name,
      key: this.key,
      limit: rule.burst,
      remaining,
      resetMs: Math.ceil((rule.burst - remaining) / rule.ratePerMs),
      retryAfterMs,
    };
  }

  #allow(now: number): Decision {
    return this.#decision(now, true, 0);
  }

  #deny(now: number, retryAfterMs: number): Decision {
    return this.#decision(
      now,
      false,
      retryAfterMs === Number.POSITIVE_INFINITY ? retryAfterMs : Math.ceil(retryAfterMs),
    );
  }
}

export const tokenBucketEngine: Engine<TokenBucketRule> = {
  open: (ctx, rule, key, storageKey) => new TokenBucketKey(ctx, rule, key, storageKey),
  methods: ['consume'],
  describe: (rule) => ({ limit: rule.burst, windowSeconds: seconds(rule.burst / rule.ratePerMs) }),
};
