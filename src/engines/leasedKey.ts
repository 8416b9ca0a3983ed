/**
 * The lease core: the local state of one (policy, key) of a leased algorithm, the same state machine
 * for every algorithm, which plugs in as a `LeaseStrategy`: its subclass of `LeasedKey`, so that
 * what the store last said about the key sits on the key's one state object (a lease hit on a key
 * not in cache follows no pointer to another object). Single-flight, slow start, grant
 * accounting and the decisions' shape are its base's (`LeaseHolder`), shared with concurrency slots.
 *
 * Three regimes, chosen by the store at every sync (docs/architecture.md "How leasing works"):
 * - far from the limit, an **allowance**: the instance admits on its own and reports its usage
 *   later, riding in the next batch (write-behind);
 * - nearer, a **lease**: tokens the store counted when it granted them, spent locally, sized to the
 *   instance's demand (slow start from 1, doubling) and at most the strategy's cap, refilled ahead
 *   in the background, handed back when unused for a lease time;
 * - at the limit, or with `lease: 'exact'`, every decision is one store call.
 */
import type { Check, Decision } from '../decision.js';
import { type Demand, demandPerMs, noteDemand } from '../demand.js';
import { StoreUnavailableError } from '../errors.js';
import * as lease from '../lease.js';
import type { ReturnReason } from '../observe/events.js';
import type { TokenBucketRule, WindowRule } from '../policy.js';
import type { RunOptions } from '../stores/store.js';
import {
  BACKGROUND,
  backgroundCall,
  type Consumed,
  type EngineContext,
  handBack,
  MAX_ATTEMPTS,
  storeCall,
} from './engine.js';
import { LeaseHolder } from './leaseHolder.js';
import type { Grant, LeaseStrategy, StoreRequest, SyncParams } from './leaseStrategy.js';

/** The rules of leased algorithms: the core reads their name, `exact` and `leaseTtlMs`. */
export type LeasedRule = TokenBucketRule | WindowRule;

// Leftovers below this are rounding, not tokens worth a store call.
const EPSILON = 1e-9;
/**
 * Usage under an allowance is reported at least once per this many lease times. Not sooner: on a
 * long tail each report is a store call for a key seen a few times, and a crash loses at most the
 * allowance either way. Not much later: a window's usage reported after the window ended is never
 * counted, so the store hands out that quota again.
 */
const REPORT_EVERY_LEASES = 10;
/**
 * Unreported usage below this share of the limit, counted over the fleet (each instance's times the
 * instances), waits `SMALL_REPORT_FACTOR` times longer: on a long tail a report is a store call for
 * a few tokens of a key far from its limit. Counted per instance, 20 instances left up to 20/64 of a
 * window's quota uncounted past the window's end, and the store granted it again (+10 % on fixed
 * windows, test/sim/windowReports.test.ts).
 */
const NOTICEABLE_SHARE = 1 / 64;
const SMALL_REPORT_FACTOR = 6;
/**
 * How long a sync is taken to be in flight, batching wait included, with room to spare: an
 * allowance is renewed once it covers no more than the demand expected meanwhile (or a quarter of
 * it is left).
 */
const SYNC_LEAD_MS = 50;

/** Tokens held for one window (a bucket has a single window that never ends). */
interface Slice {
  readonly window: number;
  /** Local time the tokens die (computed from before the grant's store call: never late). */
  readonly endsAt: number;
  segments: lease.Segment[];
  /** Local time after which unused tokens are handed back. */
  expiresAt: number;
}

export abstract class LeasedKey<Res>
  extends LeaseHolder<LeasedRule, void>
  implements Demand, LeaseStrategy<Res>
{
  slice: Slice | undefined;
  /**
   * This instance's demand for the key (`src/demand.ts`), kept on the state itself: one object per
   * key. Like every number field of the states and strategies, it starts as a number (`= 0`, set in
   * the constructor): a field declared without one starts undefined, and V8 then stores it as a
   * pointer to an immutable number, so that each write of a fraction (here: every decision)
   * allocates a new one, away from the state; its reads then miss the cache on a long tail of keys.
   */
  demandSum = 0;
  demandAt = 0;
  /** The store refused `#deniedCost` tokens: this instance looks again at this local time. */
  #deniedUntil = 0;
  /**
   * When the store said the refused cost fits (what a refusal reports); the instance may look again
   * sooner (`#deniedUntil`), since peers hand unused leases back.
   */
  #retryAt = 0;
  #deniedCost = 0;
  /** Tokens this instance may still admit on its own, granted at the last sync (replaced at every sync). */
  allowance = 0;
  #lastAllowance = 0;
  #allowanceEndsAt = Number.POSITIVE_INFINITY;
  /** Tokens admitted under allowances and not yet reported, and the window they belong to. */
  unreported = 0;
  #reportWindow = 0;
  /** Of `unreported`, those admitted while the sync that reports the rest was in flight. */
  #spentInFlight = 0;
  /** Usage the sync in flight reports: taken, though the store's last answer did not count it. */
  #reporting = 0;
  /** Whether the store ever answered for this key here: before that, the first sight. */
  #known = false;
  /** Whether the first sight was admitted: only one, however long the store takes to answer. */
  #sighted = false;
  /** Local time of the last sync sent: usage is reported at least every `REPORT_EVERY_LEASES` lease times. */
  #lastSync = 0;
  /** Usage riding on hand-backs still in flight: the state is kept until they settle. */
  #handingBack = 0;
  /** Leased tokens held or spent since the last sync told the store what was spent. */
  #leasedOut = 0;

  constructor(ctx: EngineContext, rule: LeasedRule, key: string, storageKey: string) {
    super(ctx, rule, key, storageKey);
    this.demandAt = ctx.now();
  }

  // Every leased rule says it; read from the rule, which is shared and in cache.
  get writeBehind(): boolean {
    return this.rule.writeBehind;
  }

  forgoFirstSight(): void {
    this.#sighted = true;
  }

  // The algorithm's part, `LeaseStrategy` (documented there).
  abstract override get limit(): number;
  abstract get maxLease(): number;
  abstract get firstSight(): boolean;
  abstract get carriesOver(): boolean;
  abstract sync(p: SyncParams): StoreRequest<Res>;
  abstract learn(result: Res, p: SyncParams, now: number): Grant;
  abstract release(window: number, tokens: number): StoreRequest<unknown>;
  abstract cap(now: number): number;
  // Most algorithms refill at a quarter left only.
  refillsEarly(_now: number): boolean {
    return false;
  }
  abstract horizon(now: number): number;
  abstract remaining(now: number): number;
  abstract override resetMs(now: number, remaining: number): number;
  abstract refundWindow(now: number): number;
  abstract contentionRetryMs(cost: number): number;

  async consume(cost: number, check?: Check): Promise<Consumed> {
    const decision = await this.#consume(cost, check);
    return this.#consumed(decision, cost);
  }

  decideLocal(cost: number, check?: Check): Decision | undefined {
    return this.#decideLocal(cost, check);
  }

  get reportWindow(): number {
    return this.#reportWindow;
  }

  /** Undefined when only the store can say: exact mode, or before the store ever answered here. */
  estimate(): Decision | undefined {
    if (this.rule.exact || !this.#known) return undefined;
    const now = this.ctx.now();
    const decision = this.decision(now, true, 0);
    return decision.remaining >= 1 ? decision : this.decision(now, false, this.#retryAt - now);
  }

  #decideLocal(cost: number, check: Check | undefined): Decision | undefined {
    const { ctx, rule } = this;
    if (rule.exact || cost > this.maxLease) return undefined;
    const slice = this.slice;
    if (slice === undefined && this.allowance < cost) return undefined;
    const now = ctx.now();
    if (this.#spendAllowance(now, cost)) return ctx.answer(0, cost, check, this.decision(now, true, 0));
    // Expiry, hand-backs and the window's end are left to `consume`.
    if (
      slice === undefined ||
      now >= slice.endsAt ||
      now >= slice.expiresAt ||
      !lease.take(slice.segments, now, cost)
    ) {
      return undefined;
    }
    noteDemand(this, now, cost);
    this.#refillAhead(now);
    return ctx.answer(0, cost, check, this.decision(now, true, 0));
  }

  /**
   * Admits under the allowance when it covers `cost` now (false: nothing changed); the next sync
   * starts when a quarter of it is left, or later for a key seen rarely.
   */
  #spendAllowance(now: number, cost: number): boolean {
    if (this.allowance < cost || now >= this.#allowanceEndsAt) return false;
    this.allowance -= cost;
    this.unreported += cost;
    this.ctx.stats.tokensAllowed += cost;
    if (this.inflight) this.#spentInFlight += cost;
    noteDemand(this, now, cost);
    if (this.inflight || this.allowance >= this.#lastAllowance / 4) return true;
    if (this.#spendsToTheEnd(now)) return true;
    // Near the limit the store answers with a lease instead: only worth holding for a key this
    // instance expects again soon (as for refilling ahead).
    this.#acquire(this.#expectedSoon(now) ? 1 : 0, BACKGROUND).catch(() => {});
    return true;
  }

  /**
   * Whether the allowance is spent to the end before the next sync, rather than renewed at a
   * quarter left: what is left at a sync is given up (the new allowance replaces it). Only for a
   * key this instance sees rarely (little is asked for while the sync is in flight), and far from
   * its limit: near it, usage reported late drives the shared level into debt after the fact.
   */
  #spendsToTheEnd(now: number): boolean {
    if (this.allowance < Math.max(1, demandPerMs(this, now) * SYNC_LEAD_MS)) return false;
    return this.remaining(now) - this.unreported >= (3 * this.limit) / 4;
  }

  #consumed(decision: Decision, cost: number): Consumed {
    if (!decision.allowed) return { decision };
    const window = this.#reportWindow;
    return { decision, refund: () => this.refundLocal(cost, decision, window) };
  }

  refundLocal(cost: number, decision: Decision, window: number): Decision {
    this.#refundInto(window, cost);
    const remaining = Math.min(decision.limit, decision.remaining + cost);
    return { ...decision, remaining, resetMs: this.resetMs(this.ctx.now(), remaining) };
  }

  async #consume(cost: number, check: Check | undefined): Promise<Decision> {
    const { ctx, rule } = this;
    if (cost > this.limit) {
      return ctx.answer(0, cost, check, this.decision(ctx.now(), false, Number.POSITIVE_INFINITY));
    }
    if (rule.exact) return this.#consumeExact(cost, check);
    // A cost no lease can cover is decided by the store, with what this instance holds handed back
    // first (the return is queued ahead of the call): partial leases kept for it would sit idle.
    // Not when the store, as last known, could not cover the cost even with them: the call is
    // refused either way, and what is held here still serves smaller requests.
    if (cost > this.maxLease) {
      // A lease still in flight would land after the return and sit idle: wait for it first.
      if (this.inflight) await this.inflight.catch(() => {});
      const held = this.slice ? lease.unused(this.slice.segments) : 0;
      if (this.remaining(ctx.now()) + held >= cost) this.returnUnused('oversized');
      return this.#consumeExact(cost, check);
    }
    // Only what a lease can serve sizes the next one: a cost the store decides would inflate it
    // into tokens that sit idle.
    noteDemand(this, ctx.now(), cost);
    for (let attempt = 0; ; attempt++) {
      const now = ctx.now();
      if (this.#spendAllowance(now, cost)) {
        return ctx.answer(attempt, cost, check, this.decision(now, true, 0));
      }
      this.#expire(now);
      const slice = this.slice;
      if (slice && lease.take(slice.segments, now, cost)) {
        this.#refillAhead(now);
        return ctx.answer(attempt, cost, check, this.decision(now, true, 0));
      }
      // First sight of a key while the fleet is known: admitted at once, within the bound
      // docs/architecture.md "Guarantees" states (one request of at most a lease per instance and
      // key), and the store asked in the background for the key's state.
      if (
        this.writeBehind &&
        this.firstSight &&
        !this.#known &&
        !this.#sighted &&
        !this.inflight &&
        attempt === 0 &&
        ctx.fleet() > 0 &&
        !ctx.suspended(this.storageKey)
      ) {
        this.#sighted = true;
        this.unreported += cost;
        ctx.stats.tokensAllowed += cost;
        this.#acquire(0).catch(() => {});
        return ctx.answer(0, cost, check, this.decision(now, true, 0));
      }
      // Tokens already leased to us exist later: there is no room anywhere until then (and what
      // exists only after the window ends waits for the next window).
      const wait = slice ? lease.msUntilAvailable(slice.segments, now, cost) : Number.POSITIVE_INFINITY;
      if (slice && Number.isFinite(wait)) {
        return ctx.answer(
          attempt,
          cost,
          check,
          this.decision(now, false, Math.min(wait, slice.endsAt - now)),
        );
      }
      if (now < this.#deniedUntil && cost >= this.#deniedCost) {
        return ctx.answer(attempt, cost, check, this.decision(now, false, this.#retryAt - now));
      }
      if (attempt === MAX_ATTEMPTS) {
        return ctx.answer(attempt, cost, check, this.decision(now, false, this.contentionRetryMs(cost)));
      }
      // What is held is too little for this cost: it goes back with the call that asks for the
      // whole cost. Kept, it would wait here for a smaller request while peers are refused (a
      // granted call gives this instance the same tokens either way).
      const held = slice ? lease.unused(slice.segments) : 0;
      const handBack = held > EPSILON && slice?.window === this.#reportWindow;
      const acquired = this.#acquire(handBack ? cost : cost - held, {}, handBack);
      // While the store is suspended no request waits on it: the call is at most a probe, and its
      // lease (if the store is back) serves the requests that come after it.
      if (ctx.suspended(this.storageKey)) {
        acquired.catch(() => {});
        throw new StoreUnavailableError('Store calls for this key are suspended');
      }
      this.waiting += cost;
      try {
        await acquired;
      } finally {
        this.waiting -= cost;
      }
    }
  }

  /** Exact mode: one store call per decision, nothing held locally but the denial memory. */
  async #consumeExact(cost: number, check: Check | undefined): Promise<Decision> {
    const { ctx } = this;
    const sentAt = ctx.now();
    if (sentAt < this.#deniedUntil && cost >= this.#deniedCost) {
      return ctx.answer(0, cost, check, this.decision(sentAt, false, this.#retryAt - sentAt));
    }
    const p: SyncParams = {
      used: 0,
      returned: 0,
      spent: 0,
      window: 0,
      want: cost,
      min: cost,
      exact: true,
      reachAhead: false,
      allowance: false,
      fleet: 0,
      sentAt,
    };
    const { op, req } = this.sync(p);
    const result = await storeCall(ctx, op, this.storageKey, req);
    const now = ctx.now();
    const grant = this.learn(result, p, now);
    this.#reportWindow = grant.window;
    if (grant.granted > 0) return ctx.answer(1, cost, check, this.decision(now, true, 0));
    this.#deniedUntil = grant.retryAt;
    this.#retryAt = grant.retryAt;
    this.#deniedCost = cost;
    return ctx.answer(1, cost, check, this.decision(now, false, grant.retryAt - now));
  }

  /**
   * Drops the tokens of a window that ended (handed back where they still count), hands back those
   * unused for a lease time, and lets an allowance die with its window. A lease spent to the end
   * is just dropped: handed back, it would give up the allowance granted since (a key near its
   * limit moves between the two) and report its usage in a call of its own, and the next request
   * would wait for another (on the fleet bench's stand-in, 21 % of the store calls).
   */
  #expire(now: number): void {
    if (now >= this.#allowanceEndsAt) this.allowance = 0;
    const slice = this.slice;
    if (!slice) return;
    if (now >= slice.endsAt) {
      if (this.carriesOver) this.returnUnused('expired');
      else this.slice = undefined;
    } else if (now >= slice.expiresAt && !this.inflight) {
      if (lease.unused(slice.segments) > EPSILON) this.returnUnused('expired');
      else this.slice = undefined;
    }
  }

  /** Starts the next lease before this one runs out, so the hot path rarely waits on the store. */
  #refillAhead(now: number): void {
    if (this.inflight || now < this.#deniedUntil) return;
    const slice = this.slice;
    if (slice && lease.unused(slice.segments) > Math.ceil(this.lastGrant / 4) && !this.refillsEarly(now))
      return;
    if (!this.#expectedSoon(now)) return;
    this.#acquire(1, BACKGROUND).catch(() => {});
  }

  /**
   * The sync with the store, single-flight (`LeaseHolder.acquireOnce`): it reports what the
   * allowance admitted and asks for a new allowance, else a lease of at least `min` (0: no lease,
   * a report only, e.g. for a key nobody is waiting on).
   */
  #acquire(min: number, options: RunOptions = {}, handBack = false): Promise<void> {
    return this.acquireOnce(
      () => this.#sync(min, options, handBack),
      () => {
        this.#spentInFlight = 0;
        this.#reporting = 0;
      },
    );
  }

  /**
   * With `handBack`, what the slice holds goes back in the same call (the slice is dropped); the
   * lease asked for is sized while it still counts as held (`cap`: one lease at a time).
   */
  #sync(min: number, options: RunOptions, handBack: boolean): Promise<void> {
    const { ctx } = this;
    const sentAt = ctx.now();
    const want = min === 0 ? 0 : Math.max(min + this.waiting, this.#extra(sentAt));
    const fleet = ctx.fleet();
    const used = this.unreported;
    this.unreported = 0;
    ctx.stats.tokensReported += used;
    this.#spentInFlight = 0;
    this.#reporting = used;
    this.#lastSync = sentAt;
    const spent = this.#spentSince();
    const slice = handBack ? this.slice : undefined;
    const returned = slice ? this.#takeBack(slice) : 0;
    const p: SyncParams = {
      used,
      returned,
      spent,
      window: this.#reportWindow,
      want,
      min: Math.min(min, want),
      exact: false,
      reachAhead: want > min,
      allowance: this.writeBehind && fleet > 0,
      fleet,
      sentAt,
    };
    const { op, req } = this.sync(p);
    return storeCall(ctx, op, this.storageKey, req, options)
      .then((result) => {
        if (slice) ctx.telemetry.leaseReturned(this.rule.name, this.key, returned, 'oversized');
        this.#learn(this.learn(result, p, ctx.now()), p);
      })
      .catch((err: unknown) => {
        // Never sent: the usage it carried is still to be reported. Otherwise it may have been
        // applied, and a report is never sent twice.
        if (err instanceof StoreUnavailableError) {
          this.unreported += used;
          ctx.stats.tokensReported -= used;
        }
        if (slice) this.#handBackFailed(slice, returned, err);
        throw err;
      });
  }

  #learn(grant: Grant, p: SyncParams): void {
    const { ctx, rule } = this;
    const now = ctx.now();
    this.#known = true;
    this.#reporting = 0; // the answer counts it
    this.#reportWindow = grant.window;
    // What was admitted under the old allowance while the call was in flight comes off the new one.
    this.allowance = Math.max(0, grant.allowance - this.#spentInFlight);
    this.#lastAllowance = grant.allowance;
    this.#allowanceEndsAt = grant.endsAt;
    if (grant.allowance > 0) {
      this.#deniedUntil = 0;
      // Slow start carries over: leases after an allowance start from its size, not from 1.
      this.lastGrant = Math.max(this.lastGrant, Math.min(this.maxLease, grant.allowance));
      return;
    }
    if (grant.granted === 0) {
      // Only a refused lease says when there is room; a report asked for none. Peers hand unused
      // leases back within a lease time: look again by then at the latest.
      if (p.want > 0) {
        this.#retryAt = grant.retryAt;
        this.#deniedUntil = Math.min(grant.retryAt, p.sentAt + rule.leaseTtlMs);
        this.#deniedCost = p.min;
      }
      return;
    }
    this.granted(grant.granted);
    this.#leasedOut += grant.granted;
    this.#deniedUntil = 0;
    if (this.slice?.window !== grant.window) {
      if (this.slice) this.returnUnused('expired');
      this.slice = { window: grant.window, endsAt: grant.endsAt, segments: [], expiresAt: 0 };
    }
    const slice = this.slice;
    slice.segments.push({
      at: now,
      levelBefore: grant.levelBefore,
      size: grant.granted,
      ratePerMs: grant.opensPerMs,
      used: 0,
    });
    slice.expiresAt = lease.fullyCoveredAt(slice.segments) + rule.leaseTtlMs;
  }

  /** Drops `slice`, whose unused tokens a sync hands back, and counts them as returned. */
  #takeBack(slice: Slice): number {
    const { ctx } = this;
    const tokens = Math.max(0, lease.unused(slice.segments));
    this.slice = undefined;
    this.#leasedOut = 0;
    ctx.stats.tokensReturned += tokens;
    return tokens;
  }

  /**
   * A sync that handed `slice` back failed. Certainly never sent, the slice is held again unless a
   * newer one replaced it; otherwise its tokens are stranded, as a failed hand-back's are.
   */
  #handBackFailed(slice: Slice, tokens: number, err: unknown): void {
    const { ctx, rule } = this;
    if (err instanceof StoreUnavailableError && this.slice === undefined) {
      this.slice = slice;
      this.#leasedOut += tokens;
      ctx.stats.tokensReturned -= tokens;
      return;
    }
    ctx.telemetry.leaseReturned(rule.name, this.key, tokens, 'oversized');
    ctx.telemetry.stranded(rule.name, this.key, tokens);
  }

  /**
   * Tokens worth holding beyond the request at hand: this instance's demand over the horizon,
   * doubling from 1 for a key without history (slow start), at most the strategy's cap.
   */
  #extra(now: number): number {
    const demand = Math.ceil(demandPerMs(this, now) * this.horizon(now));
    return this.nextLease(this.cap(now), demand);
  }

  /**
   * Whether this instance expects the key again within the horizon, and there is room to lease it
   * anything: tokens fetched ahead for a quiet instance would sit idle while busier ones are refused.
   */
  #expectedSoon(now: number): boolean {
    return demandPerMs(this, now) * this.horizon(now) >= 1 && this.cap(now) >= 1;
  }

  /**
   * Hands back unused leased tokens and reports what the allowance admitted, in one call (a batch
   * item riding with others: no round trip of its own). The allowance itself is given up.
   */
  override returnUnused(reason: ReturnReason): void {
    const spent = this.#spentSince();
    const slice = this.slice;
    this.slice = undefined;
    this.allowance = 0;
    this.#leasedOut = 0;
    const tokens = slice ? Math.max(0, lease.unused(slice.segments)) : 0;
    // A sync in flight reports what it carries; usage admitted meanwhile goes now.
    const used = this.unreported;
    if (tokens <= EPSILON && used <= 0) return;
    this.unreported = 0;
    this.ctx.stats.tokensReported += used;
    const { ctx, rule } = this;
    // Usage and tokens of different windows (the window turned): each goes to its own.
    const window = slice?.window ?? this.#reportWindow;
    if (used > 0 && window !== this.#reportWindow) {
      const report = this.sync(this.#report(this.#reportWindow, used, 0));
      const unsent = this.#requeue(used);
      this.#handingBack += used;
      const call = storeCall(ctx, report.op, this.storageKey, report.req, BACKGROUND)
        .catch((err: unknown) => {
          if (err instanceof StoreUnavailableError) unsent();
        })
        .finally(() => {
          this.#handingBack -= used;
        });
      ctx.track(call);
    }
    const reported = window === this.#reportWindow ? used : 0;
    const { op, req } = this.sync(this.#report(window, reported, tokens, spent));
    this.#handingBack += reported;
    handBack(ctx, op, this.storageKey, req, {
      policy: rule.name,
      key: this.key,
      tokens,
      reason,
      unsent: this.#requeue(reported),
    }).finally(() => {
      this.#handingBack -= reported;
    });
  }

  /**
   * What a report of `used` (of the current report window) does when it was certainly never sent:
   * the usage goes with the next report, as a sync's does, unless that names another window by
   * then (its tokens, handed back with it, are stranded).
   */
  #requeue(used: number): () => void {
    const reportWindow = this.#reportWindow;
    return () => {
      if (this.#reportWindow !== reportWindow) return;
      this.unreported += used;
      this.ctx.stats.tokensReported -= used;
    };
  }

  /**
   * Leased tokens spent since the last sync (what was leased less what is still held), and from
   * now on counted from what is held.
   */
  #spentSince(): number {
    const held = this.slice ? Math.max(0, lease.unused(this.slice.segments)) : 0;
    const spent = Math.max(0, this.#leasedOut - held);
    this.#leasedOut = held;
    return spent;
  }

  /** A sync that only reports usage and hands tokens back: no lease, no allowance asked for. */
  #report(window: number, used: number, returned: number, spent = 0): SyncParams {
    return {
      used,
      returned,
      spent,
      window,
      want: 0,
      min: 0,
      exact: false,
      reachAhead: false,
      allowance: false,
      fleet: 0,
      sentAt: this.ctx.now(),
    };
  }

  override sweep(now: number): boolean {
    if (this.inflight) return false;
    this.#expire(now);
    // Usage is reported now and then even if the allowance lasts (keeping it), so the store's view
    // catches up.
    if (this.unreported > 0 && now - this.#lastSync >= this.#reportEveryMs()) {
      this.#acquire(0, BACKGROUND).catch(() => {});
      return false;
    }
    // An idle entry holds nothing worth keeping once its demand has decayed — except an allowance,
    // which saves its next visit a store call.
    return (
      this.slice === undefined &&
      this.allowance <= 0 &&
      this.unreported <= 0 &&
      this.#handingBack <= 0 &&
      now >= this.#deniedUntil &&
      demandPerMs(this, now) * 1000 < 0.01
    );
  }

  /** How long usage under an allowance may go unreported when nothing else reports it. */
  #reportEveryMs(): number {
    const every = REPORT_EVERY_LEASES * this.rule.leaseTtlMs;
    const small = this.unreported * Math.max(1, this.ctx.fleet()) < this.limit * NOTICEABLE_SHARE;
    return small ? every * SMALL_REPORT_FACTOR : every;
  }

  async refund(cost: number): Promise<void> {
    const { ctx } = this;
    // The refused cost may fit now.
    this.#deniedUntil = 0;
    const now = ctx.now();
    const window = this.refundWindow(now);
    if (this.#putBack(this, window, now, cost)) return;
    const { op, req } = this.release(window, cost);
    await storeCall(ctx, op, this.storageKey, req);
  }

  /**
   * Puts back tokens of a multi-rule check refused elsewhere, into whatever state holds the key
   * now when it holds tokens of the same window, else to the store.
   */
  #refundInto(window: number, cost: number): void {
    const { ctx } = this;
    const current = ctx.peek(this.storageKey);
    if (current instanceof LeasedKey && this.#putBack(current, window, ctx.now(), cost)) return;
    const { op, req } = this.release(window, cost);
    backgroundCall(ctx, op, this.storageKey, req);
  }

  /** Gives `cost` tokens back to what `state` holds of `window`; false when it holds nothing of it. */
  #putBack(state: LeasedKey<unknown>, window: number, now: number, cost: number): boolean {
    if (state.unreported >= cost && state.#reportWindow === window) {
      state.unreported -= cost;
      state.allowance += cost;
      this.ctx.stats.tokensAllowed -= cost;
      return true;
    }
    const slice = state.slice;
    if (slice === undefined || slice.window !== window || now >= slice.endsAt) return false;
    lease.refund(slice.segments, now, cost);
    return true;
  }

  /** The store's last word carried forward, plus what this instance holds, less what it has not reported. */
  protected override remainingAt(now: number): number {
    const held = this.slice ? lease.available(this.slice.segments, now) : 0;
    return this.remaining(now) + held - this.unreported - this.#reporting;
  }
}
