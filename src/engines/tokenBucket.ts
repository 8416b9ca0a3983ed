/**
 * Token bucket engine: leases segments of the shared bucket (see `src/lease.ts`), sized to demand,
 * refilled ahead in the background, handed back on expiry; `lease: 'exact'` asks the store for
 * every decision.
 */
import { msUntilRoom, type TokenBucketShape } from '../algorithms/tokenBucket.js';
import type { Check, Decision } from '../decision.js';
import { type Demand, demandPerMs, noteDemand } from '../demand.js';
import { StoreUnavailableError } from '../errors.js';
import * as lease from '../lease.js';
import type { ReturnReason } from '../observe/events.js';
import type { TokenBucketRule } from '../policy.js';
import type { RunOptions } from '../stores/store.js';
import { tokenBucketAcquire, tokenBucketRelease, tokenBucketSync } from '../stores/tokenBucketOps.js';
import {
  BACKGROUND,
  type Consumed,
  type Engine,
  type EngineContext,
  handBack,
  handBackWhenServed,
  type KeyState,
  MAX_ATTEMPTS,
  seconds,
  storeCall,
} from './engine.js';

function shapeOf(rule: TokenBucketRule): TokenBucketShape {
  return { rate: rule.rate, periodMs: rule.periodMs, burst: rule.burst };
}

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
  /**
   * Tokens this instance may still admit on its own (write-behind), granted by the store while the
   * bucket was far from empty; replaced at every sync.
   */
  allowance = 0;
  lastAllowance = 0;
  /** Tokens admitted under allowances and not yet reported to the store. */
  unreported = 0;
  /** Of `unreported`, those admitted while the sync that reports the rest was in flight. */
  spentInFlight = 0;
  /** Whether the store ever answered for this key here: before that, the first sight. */
  known = false;
  /** Local time of the last sync sent: usage is reported at least once a lease time. */
  lastSync = 0;

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
    const decision = this.#decideLocal(cost, check);
    return decision === undefined ? undefined : this.#consumed(decision, cost);
  }

  decideLocal(cost: number, check?: Check): Decision | undefined {
    return this.#decideLocal(cost, check);
  }

  #decideLocal(cost: number, check: Check | undefined): Decision | undefined {
    const { ctx, rule } = this;
    if (rule.exact || cost > rule.maxLease) return undefined;
    if (this.allowance >= cost) {
      const now = ctx.now();
      this.#spendAllowance(now, cost);
      return ctx.answer(0, cost, check, this.#allow(now));
    }
    if (this.segments.length === 0) return undefined;
    const now = ctx.now();
    if (now >= this.expiresAt || !lease.take(this.segments, now, cost)) return undefined;
    noteDemand(this.demand, now, cost);
    this.#refillAhead(now);
    return ctx.answer(0, cost, check, this.#allow(now));
  }

  /** Admits under the allowance; the next sync starts when a quarter of it is left. */
  #spendAllowance(now: number, cost: number): void {
    this.allowance -= cost;
    this.unreported += cost;
    if (this.inflight) this.spentInFlight += cost;
    noteDemand(this.demand, now, cost);
    if (this.inflight || this.allowance >= this.lastAllowance / 4) return;
    // Near the limit the store answers with a lease instead: only worth holding for a key this
    // instance expects again soon (as for refilling ahead).
    this.#acquire(this.#expectedSoon(now) ? 1 : 0, BACKGROUND).catch(() => {});
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
      if (this.allowance >= cost) {
        this.#spendAllowance(now, cost);
        return ctx.answer(attempt, cost, check, this.#allow(now));
      }
      if (this.segments.length > 0 && now >= this.expiresAt && !this.inflight) this.returnUnused('expired');
      if (lease.take(this.segments, now, cost)) {
        this.#refillAhead(now);
        return ctx.answer(attempt, cost, check, this.#allow(now));
      }
      // First sight of a key while the fleet is known: admitted at once, within the bound
      // docs/architecture.md "Guarantees" states (one request of at most a lease per instance and
      // key), and the store asked in the background for the key's state.
      if (
        rule.writeBehind &&
        !this.known &&
        !this.inflight &&
        attempt === 0 &&
        ctx.fleet() > 0 &&
        !ctx.suspended(this.storageKey)
      ) {
        this.unreported += cost;
        this.#acquire(0).catch(() => {});
        return ctx.answer(0, cost, check, this.#allow(now));
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
      ...shapeOf(rule),
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
    if (!this.#expectedSoon(now)) return;
    this.#acquire(1, BACKGROUND).catch(() => {});
  }

  /** Whether this instance expects the key again within the lease horizon (its recent demand). */
  #expectedSoon(now: number): boolean {
    return demandPerMs(this.demand, now) * this.rule.horizonMs >= 1;
  }

  /**
   * Single-flight: concurrent misses for one key share one store call. It reports what the
   * allowance admitted and asks for a new allowance, else a lease of at least `min` (0: no lease,
   * a report only, e.g. for a key nobody is waiting on).
   */
  #acquire(min: number, options: RunOptions = {}): Promise<void> {
    if (this.inflight) return this.inflight;
    const { ctx, rule } = this;
    const want = min === 0 ? 0 : this.#leaseSize(min);
    const fleet = ctx.fleet();
    const used = this.unreported;
    this.unreported = 0;
    this.spentInFlight = 0;
    this.lastSync = ctx.now();
    const request = {
      ...shapeOf(rule),
      used,
      returned: 0,
      want,
      min: Math.min(min, want),
      ahead: rule.ahead,
      allowance: rule.writeBehind && fleet > 0 ? rule.burst : 0,
      fleet,
    };
    const call = storeCall(ctx, tokenBucketSync, this.storageKey, request, options)
      .then((result) => {
        const now = ctx.now();
        this.known = true;
        this.level = result.levelBefore - result.granted;
        this.levelAt = now;
        // What was admitted under the old allowance while the call was in flight comes off the new one.
        this.allowance = Math.max(0, result.allowance - this.spentInFlight);
        this.lastAllowance = result.allowance;
        if (result.allowance > 0) {
          this.deniedUntil = 0;
          // Slow start carries over: leases after an allowance start from its size, not from 1.
          this.lastGrant = Math.max(this.lastGrant, Math.min(rule.maxLease, result.allowance));
          return;
        }
        if (result.granted === 0) {
          // Only a refused lease says when the bucket has room; a report asked for none.
          if (request.want > 0) {
            this.deniedUntil = now + msUntilRoom(result.levelBefore, request);
            this.deniedCost = request.min;
          }
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
        // Evicted or closed while the call was in flight: the requests waiting for this call are
        // served first (their continuations run before the immediate), then the rest goes back.
        if (ctx.peek(this.storageKey) !== this) handBackWhenServed(ctx, this);
      })
      .catch((err: unknown) => {
        // Never sent: the usage it carried is still to be reported. Otherwise it may have been
        // applied, and a report is never sent twice.
        if (err instanceof StoreUnavailableError) this.unreported += used;
        throw err;
      })
      .finally(() => {
        this.inflight = undefined;
        this.spentInFlight = 0;
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

  /**
   * Hands back unused leased tokens and reports what the allowance admitted, in one call (a batch
   * item riding with others: no round trip of its own). The allowance itself is given up.
   */
  returnUnused(reason: ReturnReason): void {
    const tokens = Math.max(0, lease.unused(this.segments));
    this.segments = [];
    this.allowance = 0;
    // A sync in flight reports what it carries; usage admitted meanwhile goes now.
    const used = this.unreported;
    if (tokens <= 0 && used <= 0) return;
    this.unreported = 0;
    const { ctx, rule } = this;
    // A report and a hand-back only: no lease, no allowance asked for.
    const request = {
      ...shapeOf(rule),
      used,
      returned: tokens,
      want: 0,
      min: 0,
      ahead: 0,
      allowance: 0,
      fleet: 0,
    };
    handBack(ctx, tokenBucketSync, this.storageKey, request, {
      policy: rule.name,
      key: this.key,
      tokens,
      reason,
    });
  }

  sweep(now: number): boolean {
    if (this.inflight) return false;
    if (this.segments.length > 0 && now >= this.expiresAt) this.returnUnused('expired');
    // Usage is reported at least once a lease time (keeping the allowance), so the store's view
    // catches up and a crash loses little of it.
    if (this.unreported > 0 && now - this.lastSync >= this.rule.leaseTtlMs) {
      this.#acquire(0, BACKGROUND).catch(() => {});
      return false;
    }
    // An idle entry holds nothing worth keeping once its demand has decayed — except an allowance,
    // which saves its next visit a store call.
    return (
      this.segments.length === 0 &&
      this.allowance <= 0 &&
      this.unreported <= 0 &&
      now >= this.deniedUntil &&
      demandPerMs(this.demand, now) * 1000 < 0.01
    );
  }

  async refund(cost: number): Promise<void> {
    const { ctx, rule } = this;
    // The refused cost may fit now.
    this.deniedUntil = 0;
    if (this.unreported >= cost) {
      this.unreported -= cost;
      this.allowance += cost;
      return;
    }
    if (!rule.exact && this.segments.length > 0) {
      lease.refund(this.segments, ctx.now(), cost);
      return;
    }
    const request = { ...shapeOf(rule), tokens: cost };
    await storeCall(ctx, tokenBucketRelease, this.storageKey, request);
  }

  /** Puts back tokens of a multi-rule check refused elsewhere, into whatever state holds the key now. */
  #refund(cost: number): void {
    const current = this.ctx.peek(this.storageKey);
    if (!(current instanceof TokenBucketKey)) return;
    if (current.unreported >= cost) {
      current.unreported -= cost;
      current.allowance += cost;
    } else lease.refund(current.segments, this.ctx.now(), cost);
  }

  #globalLevel(now: number): number {
    const { rule } = this;
    return Math.min(rule.burst, this.level + Math.max(0, now - this.levelAt) * rule.ratePerMs);
  }

  #decision(now: number, allowed: boolean, retryAfterMs: number): Decision {
    const { rule } = this;
    const estimate = this.#globalLevel(now) + lease.available(this.segments, now) - this.unreported;
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
