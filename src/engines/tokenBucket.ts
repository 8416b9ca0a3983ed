/**
 * Token bucket engine: the lease core (`leasedKey.ts`) on a shared bucket. A lease is a segment
 * of the bucket's tokens that may reach ahead below zero (its tokens exist as the bucket refills,
 * see `src/lease.ts`); an allowance is a share of the level while the bucket is at least half
 * full; `lease: 'exact'` asks the store for every decision.
 */
import { type AcquireResult, msUntilRoom, type SyncResult } from '../algorithms/tokenBucket.js';
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
 * from -7.8 % to -3.8 % for 0.16 → 0.25 store calls per decision (`npm run sim`); shorter costs
 * calls faster than it gains accuracy, and lets the allowances' overshoot at a saw's rise show.
 */
const SATURATED_HORIZON = 0.4;
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

  cap(): number {
    // Oversubscribed, one lease at a time: tokens fetched while some are still held would wait here
    // for this instance's requests while peers are refused (for a lease of 1 or 2, "a quarter
    // left" is the whole of what is left).
    const holding = this.slice !== undefined && lease.unused(this.slice.segments) >= 1;
    return holding && this.#oversubscribed() ? 0 : this.rule.maxLease;
  }

  horizon(): number {
    // Every token held here waits for this instance's next requests while peers are refused
    // (docs/accuracy.md). Sized to a shorter horizon, less of the refill waits.
    return this.#oversubscribed() ? this.rule.horizonMs * SATURATED_HORIZON : this.rule.horizonMs;
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
