import { LRUCache } from 'lru-cache';
import { MONTH } from './algorithms/fixedWindow.js';
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
import type { Consumed } from './engines/engine.js';
import { ConfigError, StoreUnavailableError } from './errors.js';
import { countOption, isOptionsObject, knownOptions } from './options.js';
import type { FailMode, Rule } from './policy.js';
import type { Store } from './stores/store.js';
import { tokenBucketDebit } from './stores/tokenBucketOps.js';

/** What a rule's fail policy works from: its limit as a token bucket, and whether it can write back. */
interface FailRule extends TokenBucketShape {
  readonly name: string;
  readonly fail: FailMode;
  /** The shared state is a token bucket, so what the fallback admitted can be debited from it. */
  readonly writeBack: boolean;
}

/** A month, for the local bucket of a calendar-month quota. */
const MONTH_MS = 30 * 86_400_000;

/** A rule's limit as a token bucket: `burst` at once, refilled at the rule's sustained rate. */
function failRule(rule: Rule): FailRule {
  const fail = 'fail' in rule ? rule.fail : 'closed';
  switch (rule.algorithm) {
    case 'token-bucket':
    case 'leaky-bucket': {
      const { name, rate, periodMs, burst } = rule;
      return { name, fail, rate, periodMs, burst, writeBack: rule.algorithm === 'token-bucket' };
    }
    case 'concurrency':
      // Slots are not a rate; concurrency policies have no consume() and no fail policy.
      return {
        name: rule.name,
        fail: 'closed',
        rate: rule.limit,
        periodMs: 1,
        burst: rule.limit,
        writeBack: false,
      };
    default: {
      const periodMs = rule.windowMs === MONTH ? MONTH_MS : rule.windowMs;
      return { name: rule.name, fail, rate: rule.limit, periodMs, burst: rule.limit, writeBack: false };
    }
  }
}

/** Per (policy, key) state of the fail policy. */
interface FallbackState {
  readonly storageKey: string;
  /** Decayed sum of tokens this instance leased for the key, as of `leasedAt`. */
  leased: number;
  leasedAt: number;
  /** The local bucket of the current or last outage; dropped once it has refilled. */
  local: { rule: FailRule; shape: TokenBucketShape; state: TokenBucketState | undefined } | undefined;
  /** Tokens admitted by the fallback and not yet written back to the store. */
  owed: number;
}

export interface FailoverOptions {
  store: Store;
  now: () => number;
  /** Validated here; see `LimiterOptions.expectedInstances`. */
  expectedInstances: unknown;
  /** Instances the store last counted sharing the limits (0: not known yet). */
  fleet: () => number;
  breaker: BreakerOptions;
  /** Most keys with fallback state (and so with a pending write-back): the limiter's `maxKeys`. */
  maxKeys: number;
  /** Registers background work so the limiter's `close()` waits for it. */
  track: (work: Promise<unknown>) => void;
  /** Hears every change of the breakers' worst state (for observers). */
  onBreaker: (state: BreakerState) => void;
}

/**
 * Debts written back at once: they go out together in a few batches, instead of one round trip
 * each (a flood of new keys left 2 553 debts behind), yet a long backlog does not queue past the
 * store's timeout and come back as not sent.
 */
const DRAIN_SLICE = 256;

/** Time constant of the share estimate: leases older than a few multiples of this stop counting. */
const SHARE_TAU_MS = 5000;

/**
 * Failure handling for the limiter: the breakers in front of the store, the decisions of each
 * rule's fail policy, and the write-back of what the fallback admitted once the store answers.
 *
 * Write-back never counts twice: a debt leaves `owed` before its debit is sent and comes back only
 * when the debit was certainly not sent (`StoreUnavailableError`). A debit that failed otherwise
 * may have been applied, so it is dropped rather than re-sent.
 */
export class Failover {
  readonly store: GuardedStore;
  readonly stats = { fallbackDecisions: 0, tokensWrittenBack: 0, tokensNotWrittenBack: 0 };
  readonly #expectedInstances: number;
  readonly #now: () => number;
  readonly #track: (work: Promise<unknown>) => void;
  /** Bounded like the limiter's table; a state forgotten with a debt counts it as not written back. */
  readonly #fleet: () => number;
  readonly #states: LRUCache<string, FallbackState>;
  readonly #debts = new Set<FallbackState>();
  #flushing: Promise<void> | undefined;
  #flushedAt = Number.NEGATIVE_INFINITY;

  constructor(options: FailoverOptions) {
    const n = countOption(options.expectedInstances, 'expectedInstances');
    if (!isOptionsObject(options.breaker)) {
      throw new ConfigError('breaker', 'expected breaker options { failures?, coolDown? }');
    }
    knownOptions(options.breaker, ['failures', 'coolDown'], 'breaker');
    this.#expectedInstances = n;
    this.#fleet = options.fleet;
    this.#now = options.now;
    this.#track = options.track;
    this.store = new GuardedStore(
      options.store,
      options.breaker,
      options.now,
      () => this.#afterSuccess(),
      options.onBreaker,
    );
    this.#states = new LRUCache<string, FallbackState>({
      max: options.maxKeys,
      dispose: (s) => {
        if (!this.#debts.delete(s)) return;
        this.stats.tokensNotWrittenBack += s.owed;
        s.owed = 0;
      },
    });
  }

  /** Records a lease the store granted: this instance's share of the key, for a later outage. */
  granted(storageKey: string, tokens: number): void {
    const now = this.#now();
    const s = this.#state(storageKey);
    s.leased = s.leased * Math.exp(-Math.max(0, now - s.leasedAt) / SHARE_TAU_MS) + tokens;
    s.leasedAt = Math.max(s.leasedAt, now);
    // The outage's local bucket has refilled: the next outage starts from a fresh share.
    if (s.local && refill(s.local.state, now, s.local.shape) >= s.local.shape.burst) s.local = undefined;
  }

  /** Decides `cost` for a key whose store call failed or is suspended, by the rule's fail policy. */
  decide(rule: Rule, key: string, storageKey: string, cost: number): Consumed {
    this.stats.fallbackDecisions++;
    const now = this.#now();
    const s = this.#state(storageKey);
    if (s.local === undefined || s.local.rule.name !== rule.name) {
      const fr = failRule(rule);
      s.local = { rule: fr, shape: this.#localShape(fr, s, now), state: undefined };
    }
    const local = s.local;
    const { rule: fr, shape } = local;
    // A literal per decision, not a spread of shared fields (see `decisionWith` in src/decision.ts).
    const answer = (
      allowed: boolean,
      remaining: number,
      resetMs: number,
      retryAfterMs: number,
    ): Decision => ({
      allowed,
      policy: fr.name,
      key,
      limit: fr.burst,
      remaining,
      resetMs,
      retryAfterMs,
      source: 'fallback',
    });
    const breaker = this.store.breakerFor(storageKey);
    const untilProbe = breaker.state === 'closed' ? breaker.coolDownMs : breaker.msUntilProbe();
    const level = refill(local.state, now, shape);
    let decision: Decision;
    if (fr.fail === 'closed') {
      decision = answer(false, 0, resetIn(0, fr), Math.max(1, Math.ceil(untilProbe)));
    } else if (fr.fail === 'open') {
      // Everything passes; the local bucket only meters what this instance's share would leave.
      const after = Math.max(0, level - cost);
      local.state = { level: after, ts: now };
      this.#owe(s, fr, cost);
      decision = answer(true, Math.floor(after), resetIn(after, shape), 0);
    } else {
      const t = acquire(local.state, now, {
        rate: shape.rate,
        periodMs: shape.periodMs,
        burst: shape.burst,
        want: cost,
        min: cost,
        ahead: 0,
      });
      local.state = t.state;
      const left = t.result.levelBefore - t.result.granted;
      const remaining = Math.max(0, Math.floor(left));
      const resetMs = resetIn(left, shape);
      if (t.result.granted > 0) {
        this.#owe(s, fr, cost);
        decision = answer(true, remaining, resetMs, 0);
      } else {
        // A cost above the local burst can only pass once the shared store is back.
        const wait = cost > shape.burst ? untilProbe : msUntilRoom(t.result.levelBefore, shape, cost, 0);
        decision = answer(false, remaining, resetMs, Math.max(1, Math.ceil(wait)));
      }
    }
    if (!decision.allowed) return { decision };
    const refund = () => {
      s.owed = Math.max(0, s.owed - cost);
      if (fr.fail === 'local')
        local.state = release(local.state, this.#now(), {
          rate: shape.rate,
          periodMs: shape.periodMs,
          burst: shape.burst,
          tokens: cost,
        }).state;
      return { ...decision, remaining: Math.min(decision.limit, decision.remaining + cost) };
    };
    return { decision, refund };
  }

  /** Writes back every pending debt once (debts the store cannot take yet stay pending). */
  flush(): Promise<void> {
    this.#flushing ??= this.#drain().finally(() => {
      this.#flushing = undefined;
    });
    return this.#flushing;
  }

  /** The limiter closed: debts still pending will never be written back, and are counted so. */
  abandonDebts(): void {
    for (const s of this.#debts) {
      this.stats.tokensNotWrittenBack += s.owed;
      s.owed = 0;
    }
    this.#debts.clear();
  }

  async #drain(): Promise<void> {
    this.#flushedAt = this.#now();
    // Debts of a shard still suspended wait for a later flush. Asked again for each debt: of a
    // shard whose probe is due, the first debt is the probe and the others wait for its outcome
    // instead of being refused by the breaker one by one.
    const due = [...this.#debts].filter((s) => this.store.wouldPass(s.storageKey));
    for (let i = 0; i < due.length; i += DRAIN_SLICE) {
      const sent = due
        .slice(i, i + DRAIN_SLICE)
        .map((s) => (this.store.wouldPass(s.storageKey) ? this.#writeBack(s) : undefined));
      await Promise.all(sent);
    }
  }

  async #writeBack(s: FallbackState): Promise<void> {
    this.#debts.delete(s);
    const tokens = s.owed;
    const fr = s.local?.rule;
    if (tokens <= 0 || fr === undefined) return;
    s.owed = 0;
    try {
      const { rate, periodMs, burst } = fr;
      await this.store.run(tokenBucketDebit, s.storageKey, { rate, periodMs, burst, tokens });
      this.stats.tokensWrittenBack += tokens;
    } catch (err) {
      // Not sent (its shard is suspended or disconnected): it stays owed, for the next success.
      if (err instanceof StoreUnavailableError) {
        s.owed += tokens;
        this.#debts.add(s);
      } else {
        this.stats.tokensNotWrittenBack += tokens;
      }
    }
  }

  /** Flushes after a successful call, at most once per cool-down: debts of a shard still down stay. */
  #afterSuccess(): void {
    if (this.#debts.size === 0 || this.#flushing) return;
    if (this.#now() - this.#flushedAt < this.store.coolDownMs) return;
    this.#track(this.flush());
  }

  #owe(s: FallbackState, fr: FailRule, tokens: number): void {
    if (!fr.writeBack) return;
    s.owed += tokens;
    this.#debts.add(s);
  }

  #state(storageKey: string): FallbackState {
    let s = this.#states.get(storageKey);
    if (!s) {
      s = { storageKey, leased: 0, leasedAt: this.#now(), local: undefined, owed: 0 };
      this.#states.set(storageKey, s);
    }
    return s;
  }

  /**
   * This instance's part of the limit during an outage: one over the fleet (the instances the store
   * counted last, or `expectedInstances` when more), or its share of the key's leases before the
   * outage when that is larger (e.g. sticky balancing), at most all of it.
   */
  #localShape(fr: FailRule, s: FallbackState, now: number): TokenBucketShape {
    const leased = s.leased * Math.exp(-Math.max(0, now - s.leasedAt) / SHARE_TAU_MS);
    // Against what the rule could give in that time (its burst and the refill), not the refill
    // alone: any instance in use outruns an hourly or daily quota's refill, and took the whole rule.
    const given = fr.burst + (fr.rate * SHARE_TAU_MS) / fr.periodMs;
    const fleet = Math.max(this.#expectedInstances, this.#fleet());
    const share = Math.min(1, Math.max(1 / fleet, leased / given));
    // At least one token (or the whole burst if smaller), so a small limit is not shut off entirely.
    const burst = Math.max(fr.burst * share, Math.min(1, fr.burst));
    return { rate: fr.rate * share, periodMs: fr.periodMs, burst };
  }
}

function resetIn(level: number, shape: TokenBucketShape): number {
  return Math.max(0, Math.ceil(((shape.burst - level) * shape.periodMs) / shape.rate));
}
