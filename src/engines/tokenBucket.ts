/**
 * Token bucket engine: the lease core (`leasedKey.ts`) on a shared bucket. A lease is a segment
 * of the bucket's tokens that may reach ahead below zero (its tokens exist as the bucket refills,
 * see `src/lease.ts`); an allowance is a share of the level while the bucket is at least half
 * full; below that, an instance with little demand for the key asks for exactly each request's cost
 * (`EXACT_BELOW`); `lease: 'exact'` asks the store for every decision.
 */
import { type AcquireResult, msUntilRoom, type SyncResult } from '../algorithms/tokenBucket.js';
import { demandPerMs } from '../demand.js';
import * as lease from '../lease.js';
import type { TokenBucketRule } from '../policy.js';
import { tokenBucketAcquire, tokenBucketRelease, tokenBucketSync } from '../stores/tokenBucketOps.js';
import { type Engine, type EngineContext, seconds } from './engine.js';
import { LeasedKey } from './leasedKey.js';
import type { Grant, StoreRequest, SyncParams } from './leaseStrategy.js';

/**
 * Share of the lease horizon leases are sized to while the bucket is oversubscribed. Tokens leased
 * then wait at their instance, on average, half the horizon: a standing stock of about
 * `rate × horizon / 2` that the cluster lags the exact bucket by. 0.4 cut steady-2x's worst drift
 * from -7.8 % to -3.8 % for 0.16 → 0.25 store calls per decision (`npm run sim`); 0.3, with quiet
 * instances deciding exactly (`EXACT_BELOW`), brought weighted-costs' from -2.7 % to -1.7 % for
 * 0.72 → 0.76 calls per decision (docs/accuracy.md). Shorter costs the busy instances' leases
 * (the fleet bench's hot keys) calls faster than it gains accuracy.
 */
const SATURATED_HORIZON = 0.3;
/**
 * Oversubscribed, an instance whose demand over the saturated horizon comes to fewer tokens than
 * this decides exactly: it asks the store for the cost at hand and holds nothing it has not spent.
 * A lease of two at such an instance strands its second token until the instance's next request
 * (100 ms at steady-2x's 10 requests per second), while peers are refused: about ten tokens over
 * twenty instances, -3.5 % a few seconds in. Exactly decided, a refusal is remembered until the
 * store's retry time, as a leased one is. Busier instances spend what they lease within a few ms
 * and keep leasing (the fleet bench's hot keys at hundreds of requests per second per instance).
 */
const EXACT_BELOW = 2.25;
/**
 * Share of the lease horizon's demand a lease covers while the bucket is at least half full, in a
 * fleet known to have more than one instance (one instance holds one lease at most, 10 % of the
 * burst; the fleet is not known before the first heartbeat's answer). The store
 * grants such a lease instead of an allowance only to an instance whose demand over the horizon
 * exceeds its share of the level, and refills behind it up to the burst: the tokens a fleet holds
 * are then capacity on top of the burst, admitted when demand rises past the limit (saw: about 40
 * held at the end of each quiet phase). With quiet instances deciding exactly, saw's
 * under-admission no longer hides that: it ended at +2.0 % (worst +2.1 %) with the whole horizon,
 * +1.3 % (+1.5 %) with 0.8; 0.5 gave +0.2 % (+0.7 %) but near-limit 0.57 → 0.84 calls per decision.
 */
const FAR_HORIZON = 0.8;
/**
 * Below this share of the burst after the instance's last grant, the bucket counts as
 * oversubscribed: the store grants no allowances there (`allowanceFrom`), the fleet leases, and
 * with the level hovering near zero (peers' requests take each token as it exists, hand-backs put
 * some back) a level just above zero says nothing about the demand. Counted from below zero only,
 * weighted-costs' instances sized most leases to the whole horizon (docs/accuracy.md).
 */
const OVERSUBSCRIBED_BELOW = 0.5;

/** A bucket's key state: the lease core and, as its strategy, what the store last said of the level. */
class TokenBucketKey extends LeasedKey<AcquireResult | SyncResult> {
  declare readonly rule: TokenBucketRule;
  /** Last known level after our grant, and when we learned it (numbers from the start: see `LeasedKey.demandSum`). */
  #level = 0;
  #levelAt = 0;

  constructor(ctx: EngineContext, rule: TokenBucketRule, key: string, storageKey: string) {
    super(ctx, rule, key, storageKey);
    this.#level = rule.burst;
    this.#levelAt = ctx.now();
  }

  // Read from the rule, not kept per key: the rule is shared and in cache.
  override get limit(): number {
    return this.rule.burst;
  }

  get maxLease(): number {
    return this.rule.maxLease;
  }

  get firstSight(): boolean {
    return true;
  }

  get carriesOver(): boolean {
    return false;
  }

  // The requests below are literals, not spreads of the rule (see `decisionWith` in src/decision.ts).
  sync(p: SyncParams): StoreRequest<AcquireResult | SyncResult> {
    const { rate, periodMs, burst } = this.rule;
    // An exact decision is a plain acquisition: nothing to settle, nothing granted ahead.
    if (p.exact) {
      return { op: tokenBucketAcquire, req: { rate, periodMs, burst, want: p.want, min: p.min, ahead: 0 } };
    }
    const req = {
      rate,
      periodMs,
      burst,
      used: p.used,
      returned: p.returned,
      want: p.want,
      min: p.min,
      ahead: p.reachAhead ? this.rule.ahead : 0,
      allowance: p.allowance ? this.rule.burst : 0,
      fleet: p.fleet,
      holdMs: this.rule.leaseTtlMs,
      spent: p.spent,
    };
    return { op: tokenBucketSync, req };
  }

  learn(result: AcquireResult | SyncResult, p: SyncParams, now: number): Grant {
    this.#level = result.levelBefore - result.granted;
    this.#levelAt = now;
    const ahead = p.reachAhead ? this.rule.ahead : 0;
    return {
      granted: result.granted,
      allowance: 'allowance' in result ? result.allowance : 0,
      levelBefore: result.levelBefore,
      opensPerMs: this.rule.ratePerMs,
      window: 0,
      endsAt: Number.POSITIVE_INFINITY,
      // Tokens out in peers' leases come back within a lease time if unused: no later than that.
      retryAt: now + msUntilRoom(result.levelBefore, this.rule, p.min, ahead, result),
    };
  }

  release(_window: number, tokens: number): StoreRequest<null> {
    const { rate, periodMs, burst } = this.rule;
    return { op: tokenBucketRelease, req: { rate, periodMs, burst, tokens } };
  }

  cap(now: number): number {
    if (this.#decidesExactly(now)) return 0;
    if (!this.#oversubscribed()) return this.#farCap(now);
    // Oversubscribed, one lease at a time: tokens fetched while some are still held would wait here
    // for this instance's requests while peers are refused (for a lease of 1 or 2, "a quarter
    // left" is the whole of what is left). A busy instance queues a second (`#queuesAnother`).
    const held = this.slice === undefined ? 0 : lease.unused(this.slice.segments);
    return held < 1 || this.#queuesAnother(now, held) ? this.rule.maxLease : 0;
  }

  override refillsEarly(now: number): boolean {
    const slice = this.slice;
    return (
      slice !== undefined && this.#oversubscribed() && this.#queuesAnother(now, lease.unused(slice.segments))
    );
  }

  /**
   * Oversubscribed, whether an instance holding `held` tokens fetches its next lease already: when
   * its demand over the saturated horizon covers them and a whole lease more, up to two leases (the
   * most `H` counts in docs/architecture.md "Guarantees"). Such an instance spends each token
   * within milliseconds of its existing; waiting until its lease was spent, it asked again behind
   * every peer's lease (about 800 ms of refill in retry-honour) and refused its own clients
   * meanwhile, while the refill went to quieter peers' leases, where tokens wait for slower
   * requests. With the second lease queued, its share of the refill follows its demand: worst drift
   * of retry-honour over seeds 1–24 -2.23 → -1.91 % on average, the fleet stand-in's store calls
   * unchanged (docs/accuracy.md). Unbounded (as many leases as the demand covers) cost the stand-in
   * 2.4 % more calls for the same drift: the hot keys' instances ran into `ahead` and were refused.
   */
  #queuesAnother(now: number, held: number): boolean {
    const { maxLease, horizonMs } = this.rule;
    const demand = demandPerMs(this, now) * horizonMs * SATURATED_HORIZON;
    return held + maxLease <= Math.min(2 * maxLease, demand);
  }

  horizon(): number {
    // Every token held here waits for this instance's next requests while peers are refused
    // (docs/accuracy.md). Sized to a shorter horizon, less of the refill waits.
    return this.#oversubscribed() ? this.rule.horizonMs * SATURATED_HORIZON : this.rule.horizonMs;
  }

  /**
   * Far from empty, in a fleet, a lease covers `FAR_HORIZON` of the horizon's demand (at least 1:
   * whether the instance expects the key again soon is still counted over the whole horizon).
   */
  #farCap(now: number): number {
    const { rule } = this;
    if (this.ctx.fleet() <= 1) return rule.maxLease;
    const demand = Math.ceil(demandPerMs(this, now) * rule.horizonMs * FAR_HORIZON);
    return Math.min(rule.maxLease, Math.max(1, demand));
  }

  /**
   * Whether this instance asks for exactly the cost at hand (`EXACT_BELOW`). Decided afresh at every
   * call, without hysteresis: an instance that stayed exact until the level was back at 3/4 of the
   * burst, or its demand doubled, made near-limit 0.84 → 0.96 calls per decision and retry-honour's
   * worst drift -1.6 → -2.0 % (measured with `FAR_HORIZON` 0.5). Switching costs nothing: a lease
   * and an exact decision are one call each.
   */
  #decidesExactly(now: number): boolean {
    return (
      this.#oversubscribed() && demandPerMs(this, now) * this.rule.horizonMs * SATURATED_HORIZON < EXACT_BELOW
    );
  }

  #oversubscribed(): boolean {
    return this.#level < this.rule.burst * OVERSUBSCRIBED_BELOW;
  }

  remaining(now: number): number {
    const { rule } = this;
    return Math.min(rule.burst, this.#level + Math.max(0, now - this.#levelAt) * rule.ratePerMs);
  }

  override resetMs(_now: number, remaining: number): number {
    return Math.ceil((this.rule.burst - remaining) / this.rule.ratePerMs);
  }

  refundWindow(): number {
    return 0;
  }

  contentionRetryMs(cost: number): number {
    return cost / this.rule.ratePerMs;
  }
}

export const tokenBucketEngine: Engine<TokenBucketRule> = {
  open: (ctx, rule, key, storageKey) => new TokenBucketKey(ctx, rule, key, storageKey),
  methods: ['consume'],
  describe: (rule) => ({ limit: rule.burst, windowSeconds: seconds(rule.burst / rule.ratePerMs) }),
};
