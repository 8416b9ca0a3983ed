import {
  acquire,
  msUntilRoom,
  refill,
  release,
  type TokenBucketShape,
  type TokenBucketState,
} from './algorithms/tokenBucket.js';
import { type BreakerOptions, type BreakerState, GuardedStore } from './breaker.js';
import type { Decision } from './decision.js';
import { ConfigError, StoreUnavailableError } from './errors.js';
import type { FailMode } from './policy.js';
import type { Store } from './stores/store.js';
import { tokenBucketDebit } from './stores/tokenBucketOps.js';

/** The rule fields a fail policy needs. */
export interface FailRule extends TokenBucketShape {
  readonly name: string;
  readonly fail: FailMode;
}

/** Per (policy, key) state of the fail policy; lives in the limiter's entry, so `maxKeys` bounds it. */
export interface FallbackState {
  readonly rule: FailRule;
  readonly key: string;
  readonly storageKey: string;
  /** Decayed sum of tokens this instance leased for the key, as of `leasedAt`. */
  leased: number;
  leasedAt: number;
  /** The local bucket of the current or last outage; dropped once it has refilled. */
  local: { shape: TokenBucketShape; state: TokenBucketState | undefined } | undefined;
  /** Tokens admitted by the fallback and not yet written back to the store. */
  owed: number;
}

export interface FailoverOptions {
  store: Store;
  now: () => number;
  /** Validated here; see `LimiterOptions.expectedInstances`. */
  expectedInstances: unknown;
  breaker: BreakerOptions;
  /** Most keys whose write-back may be pending; beyond it the oldest debt is forgotten. */
  maxDebts: number;
  /** Registers background work so the limiter's `close()` waits for it. */
  track: (work: Promise<unknown>) => void;
  /** Hears every change of the breakers' worst state (for observers). */
  onBreaker: (state: BreakerState) => void;
}

/** Time constant of the share estimate: leases older than a few multiples of this stop counting. */
const SHARE_TAU_MS = 5000;

/**
 * Failure handling for the limiter: the breaker in front of the store, the decisions of each fail
 * policy, and the write-back of what the fallback admitted once the store answers again.
 *
 * Write-back never counts twice: a debt leaves `owed` before its debit is sent and comes back only
 * when the debit was certainly not sent (`StoreUnavailableError`). A debit that failed otherwise
 * may have been applied, so it is dropped rather than re-sent.
 */
export class Failover {
  readonly store: GuardedStore;
  readonly #expectedInstances: number;
  readonly stats = { fallbackDecisions: 0, tokensWrittenBack: 0, tokensNotWrittenBack: 0 };
  readonly #maxDebts: number;
  readonly #track: (work: Promise<unknown>) => void;
  readonly #debts = new Set<FallbackState>();
  readonly #now: () => number;
  #flushing: Promise<void> | undefined;
  #flushedAt = Number.NEGATIVE_INFINITY;

  constructor(options: FailoverOptions) {
    const n = options.expectedInstances;
    if (typeof n !== 'number' || !Number.isInteger(n) || n < 1) {
      throw new ConfigError('expectedInstances', `expected an integer from 1 and up, got ${String(n)}`);
    }
    if (typeof options.breaker !== 'object' || options.breaker === null) {
      throw new ConfigError('breaker', 'expected breaker options { failures?, coolDown? }');
    }
    this.#expectedInstances = n;
    this.store = new GuardedStore(
      options.store,
      options.breaker,
      options.now,
      () => this.#afterSuccess(),
      options.onBreaker,
    );
    this.#maxDebts = options.maxDebts;
    this.#now = options.now;
    this.#track = options.track;
  }

  state(rule: FailRule, key: string, storageKey: string, now: number): FallbackState {
    return { rule, key, storageKey, leased: 0, leasedAt: now, local: undefined, owed: 0 };
  }

  /** Records a grant from the store: it feeds the share estimate and ends a refilled outage bucket. */
  granted(s: FallbackState, tokens: number, now: number): void {
    s.leased = s.leased * Math.exp(-Math.max(0, now - s.leasedAt) / SHARE_TAU_MS) + tokens;
    s.leasedAt = Math.max(s.leasedAt, now);
    if (s.local && refill(s.local.state, now, s.local.shape) >= s.local.shape.burst) s.local = undefined;
  }

  /**
   * Decides `cost` for a key whose store call failed, by the rule's fail policy. `remaining` is the
   * limiter's last estimate of the shared bucket, reported by `'open'`.
   */
  decide(s: FallbackState, cost: number, now: number, remaining: number): Decision {
    this.stats.fallbackDecisions++;
    const { rule } = s;
    const ratePerMs = rule.rate / rule.periodMs;
    const base = { policy: rule.name, key: s.key, limit: rule.burst, source: 'fallback' as const };
    const breaker = this.store.breakerFor(s.storageKey);
    const untilProbe = breaker.state === 'closed' ? breaker.coolDownMs : breaker.msUntilProbe();
    if (rule.fail === 'closed') {
      const retry = untilProbe;
      const resetMs = Math.ceil(rule.burst / ratePerMs);
      return { ...base, allowed: false, remaining: 0, resetMs, retryAfterMs: Math.max(1, Math.ceil(retry)) };
    }
    if (rule.fail === 'open') {
      this.#owe(s, cost);
      const resetMs = Math.ceil((rule.burst - remaining) / ratePerMs);
      return { ...base, allowed: true, remaining, resetMs, retryAfterMs: 0 };
    }
    s.local ??= { shape: this.#localShape(s, now), state: undefined };
    const { shape } = s.local;
    const t = acquire(s.local.state, now, { ...shape, want: cost, min: cost, ahead: 0 });
    s.local.state = t.state;
    const level = t.result.levelBefore - t.result.granted;
    const reset = { remaining: Math.max(0, Math.floor(level)), resetMs: resetIn(level, shape) };
    if (t.result.granted > 0) {
      this.#owe(s, cost);
      return { ...base, allowed: true, ...reset, retryAfterMs: 0 };
    }
    // A cost above the local burst can only pass once the shared store is back.
    const wait =
      cost > shape.burst ? untilProbe : msUntilRoom(t.result.levelBefore, { ...shape, min: cost, ahead: 0 });
    return { ...base, allowed: false, ...reset, retryAfterMs: Math.max(1, Math.ceil(wait)) };
  }

  /** Puts back a fallback admission whose multi-rule check was refused elsewhere. */
  refund(s: FallbackState, cost: number, now: number): void {
    s.owed = Math.max(0, s.owed - cost);
    if (s.rule.fail === 'local' && s.local) {
      s.local.state = release(s.local.state, now, { ...s.local.shape, tokens: cost }).state;
    }
  }

  /** Writes back every pending debt once (debts the store cannot take yet stay pending). */
  flush(): Promise<void> {
    this.#flushing ??= this.#drain().finally(() => {
      this.#flushing = undefined;
    });
    return this.#flushing;
  }

  async #drain(): Promise<void> {
    this.#flushedAt = this.#now();
    for (const s of [...this.#debts]) {
      // Its shard is still suspended: it waits for a later flush.
      if (!this.store.wouldPass(s.storageKey)) continue;
      this.#debts.delete(s);
      const tokens = s.owed;
      if (tokens <= 0) continue;
      s.owed = 0;
      try {
        const { rate, periodMs, burst } = s.rule;
        await this.store.run(tokenBucketDebit, s.storageKey, { rate, periodMs, burst, tokens });
        this.stats.tokensWrittenBack += tokens;
      } catch (err) {
        // Not sent (its shard is suspended or disconnected): it stays owed, for the next success.
        if (err instanceof StoreUnavailableError) {
          this.#owe(s, tokens);
        } else {
          this.stats.tokensNotWrittenBack += tokens;
        }
      }
    }
  }

  /** Flushes after a successful call, at most once per cool-down: debts of a shard still down stay. */
  #afterSuccess(): void {
    if (this.#debts.size === 0 || this.#flushing) return;
    if (this.#now() - this.#flushedAt < this.store.coolDownMs) return;
    this.#track(this.flush());
  }

  #owe(s: FallbackState, tokens: number): void {
    s.owed += tokens;
    this.#debts.delete(s); // re-inserted last, so the set stays in order of the latest debt
    this.#debts.add(s);
    if (this.#debts.size <= this.#maxDebts) return;
    const oldest = this.#debts.values().next().value as FallbackState;
    this.#debts.delete(oldest);
    this.stats.tokensNotWrittenBack += oldest.owed;
    oldest.owed = 0;
  }

  /**
   * This instance's part of the limit during an outage: `1 / expectedInstances`, or its share of
   * the key's leases before the outage when that is larger (e.g. sticky balancing), at most all of it.
   */
  #localShape(s: FallbackState, now: number): TokenBucketShape {
    const { rule } = s;
    const leasedPerMs = (s.leased * Math.exp(-Math.max(0, now - s.leasedAt) / SHARE_TAU_MS)) / SHARE_TAU_MS;
    const share = Math.min(
      1,
      Math.max(1 / this.#expectedInstances, leasedPerMs / (rule.rate / rule.periodMs)),
    );
    // At least one token (or the whole burst if smaller), so a small limit is not shut off entirely.
    const burst = Math.max(rule.burst * share, Math.min(1, rule.burst));
    return { rate: rule.rate * share, periodMs: rule.periodMs, burst };
  }
}

function resetIn(level: number, shape: TokenBucketShape): number {
  return Math.max(0, Math.ceil(((shape.burst - level) * shape.periodMs) / shape.rate));
}
