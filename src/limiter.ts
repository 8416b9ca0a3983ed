import { LRUCache } from 'lru-cache';
import pLimit, { type LimitFunction } from 'p-limit';
import { type AcquireResult, msUntilRoom } from './algorithms/tokenBucket.js';
import type { BreakerOptions, BreakerState } from './breaker.js';
import { type Check, type Decision, type DecisionSource, latestRetry, tightest } from './decision.js';
import { type Demand, demandPerMs, noteDemand } from './demand.js';
import { ArgumentError, ClosedError, ConfigError, TokenleaseError } from './errors.js';
import { Failover, type FallbackState } from './failover.js';
import * as lease from './lease.js';
import type { Observer, ReturnReason } from './observe/events.js';
import type { HeavyHitter } from './observe/spaceSaving.js';
import { type OffendersOptions, Telemetry, type TelemetryCounts } from './observe/telemetry.js';
import { compilePolicies, type PolicyConfig, type Rule } from './policy.js';
import { storageKey } from './stores/keys.js';
import { MemoryStore } from './stores/memoryStore.js';
import type { Store } from './stores/store.js';
import { tokenBucketAcquire, tokenBucketRelease } from './stores/tokenBucketOps.js';

export interface LimiterOptions {
  /** @default new MemoryStore({ now }) */
  store?: Store;
  policies: Record<string, PolicyConfig>;
  /**
   * Clock in ms for local lease bookkeeping (the store keeps its own). The simulator passes a
   * virtual one.
   * @default Date.now
   */
  now?: () => number;
  /**
   * Most (policy, key) pairs tracked locally; the least recently used is evicted and its unused
   * tokens handed back.
   * @default 100_000
   */
  maxKeys?: number;
  /**
   * Most store calls in flight at once, so a burst of lease misses cannot flood Redis.
   * @default 32
   */
  concurrency?: number;
  /**
   * How often expired leases are handed back, in real time; 0 disables the timer (then call
   * `sweep()` yourself, as the simulator does in virtual time).
   * @default 500
   */
  sweepIntervalMs?: number;
  /**
   * Receivers of decision, store-call, lease and breaker events (metrics, alerts, logs); see
   * README "Observability". Without observers no event object is built.
   * @default []
   */
  observers?: readonly Observer[];
  /**
   * The sketch of denied keys per policy behind `topDenied()`, or `false` to keep none.
   * @default { capacity: 256, halfLife: '1m' }
   */
  offenders?: OffendersOptions | false;
  /**
   * Instances expected to share the limits. While the store is unreachable, a rule failing
   * `'local'` admits `1 / expectedInstances` of its limit per instance (or the instance's share of
   * the key's recent leases, when larger). See README "Failure behaviour".
   * @default 1
   */
  expectedInstances?: number;
  /**
   * Circuit breaker in front of the store.
   * @default { failures: 3, coolDown: '250ms' }
   */
  breaker?: BreakerOptions;
}

/** See `Limiter.describe`. */
export interface PolicyDescription {
  limit: number;
  /** Seconds to restore the whole limit from empty (at least 1): the policy's window. */
  windowSeconds: number;
}

export interface LimiterStats extends TelemetryCounts {
  /** Store calls made (acquisitions and returns). */
  storeCalls: number;
  storeErrors: number;
  leasesGranted: number;
  tokensLeased: number;
  tokensReturned: number;
  /** Decisions answered without waiting on the store. */
  localDecisions: number;
  decisions: number;
  keys: number;
  /** Decisions made by a rule's fail policy because the store failed or was suspended. */
  fallbackDecisions: number;
  /** Of `storeCalls`, those the breaker refused without reaching the store. */
  storeCallsSuspended: number;
  /** Tokens admitted by fail policies and since written back to the store. */
  tokensWrittenBack: number;
  /**
   * Tokens admitted by fail policies that were not written back: the write-back may have been
   * applied but its reply was lost (it is never sent twice), or more than `maxKeys` keys owed some.
   */
  tokensNotWrittenBack: number;
  /** The circuit breaker in front of the store: the worst state over its shards (Cluster nodes). */
  breaker: BreakerState;
}

interface Entry {
  readonly rule: Rule;
  readonly key: string;
  readonly storageKey: string;
  segments: lease.Segment[];
  /** Local time after which unused tokens are handed back. */
  expiresAt: number;
  readonly demand: Demand;
  lastGrant: number;
  /** The store refused `deniedCost` tokens until this local time. */
  deniedUntil: number;
  deniedCost: number;
  /** Last known global level after our grant, and when we learned it. */
  level: number;
  levelAt: number;
  inflight: Promise<void> | undefined;
  readonly fallback: FallbackState;
}

/** A request waiting for tokens gives up after this many acquisitions were taken by its peers. */
const MAX_ATTEMPTS = 8;

function checkCost(cost: unknown, field: string): number {
  if (typeof cost !== 'number' || !Number.isFinite(cost) || cost <= 0) {
    throw new ArgumentError(field, `expected a positive finite number, got ${String(cost)}`);
  }
  return cost;
}

function positiveInteger(value: unknown, field: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1) {
    throw new ConfigError(field, `expected an integer from 1 and up, got ${String(value)}`);
  }
  return value;
}

/**
 * Decides each request from tokens leased out of a shared store, going to the store only when a
 * lease runs low or out. See README "How leasing works" for the guarantees.
 */
export class Limiter {
  readonly #store: Store;
  readonly #failover: Failover;
  #rules: Map<string, Rule>;
  readonly #now: () => number;
  readonly #gate: LimitFunction;
  readonly #entries: LRUCache<string, Entry>;
  readonly #pending = new Set<Promise<unknown>>();
  readonly #timer: NodeJS.Timeout | undefined;
  readonly #telemetry: Telemetry;
  readonly #stats = {
    storeCalls: 0,
    storeErrors: 0,
    leasesGranted: 0,
    tokensLeased: 0,
    tokensReturned: 0,
    localDecisions: 0,
    decisions: 0,
  };
  #closing: Promise<void> | undefined;

  constructor(options: LimiterOptions) {
    if (typeof options !== 'object' || options === null)
      throw new ConfigError('options', 'expected an object');
    if (options.now !== undefined && typeof options.now !== 'function') {
      throw new ConfigError('now', 'expected a function returning milliseconds');
    }
    this.#rules = compilePolicies(options.policies);
    this.#now = options.now ?? Date.now;
    const store = options.store ?? new MemoryStore({ now: this.#now });
    if (typeof store.run !== 'function')
      throw new ConfigError('store', 'expected a Store (MemoryStore or RedisStore)');
    const maxKeys = positiveInteger(options.maxKeys ?? 100_000, 'maxKeys');
    this.#gate = pLimit(positiveInteger(options.concurrency ?? 32, 'concurrency'));
    this.#entries = new LRUCache<string, Entry>({
      max: maxKeys,
      dispose: (entry, _id, reason) =>
        this.#returnUnused(entry, reason === 'evict' ? 'evicted' : this.#closing ? 'closed' : 'reconfigured'),
    });
    const sweepMs = options.sweepIntervalMs ?? 500;
    if (typeof sweepMs !== 'number' || !Number.isFinite(sweepMs) || sweepMs < 0) {
      throw new ConfigError('sweepIntervalMs', `expected a number of ms >= 0, got ${String(sweepMs)}`);
    }
    this.#telemetry = new Telemetry({
      observers: options.observers,
      offenders: options.offenders,
      now: this.#now,
      policies: () => [...this.#rules.keys()],
      stats: () => this.stats(),
    });
    this.#failover = new Failover({
      store: this.#telemetry.instrument(store),
      now: this.#now,
      expectedInstances: options.expectedInstances ?? 1,
      breaker: options.breaker ?? {},
      maxDebts: maxKeys,
      track: (work) => this.#track(work),
      onBreaker: (state) => this.#telemetry.breaker(state),
    });
    this.#store = this.#failover.store;
    if (sweepMs > 0) this.#timer = setInterval(() => this.sweep(), sweepMs).unref();
  }

  /** Takes `cost` tokens of `policy` for `key`; resolves to a decision, never rejects for being limited. */
  consume(policy: string, key: string, cost?: number): Promise<Decision>;
  /** All-or-nothing across rules: if any is denied, tokens taken by the others are put back. */
  consume(checks: readonly Check[]): Promise<Decision>;
  async consume(policyOrChecks: string | readonly Check[], key?: string, cost = 1): Promise<Decision> {
    if (this.#closing) throw new ClosedError('Limiter');
    if (typeof policyOrChecks === 'string' || !Array.isArray(policyOrChecks)) {
      const rule = this.#rule(policyOrChecks, 'policy');
      return this.#consumeOne(rule, this.#key(key, 'key'), checkCost(cost, 'cost'));
    }
    if (policyOrChecks.length === 0) throw new ArgumentError('checks', 'expected at least one check');
    const checks = policyOrChecks.map((c, i) => {
      if (typeof c !== 'object' || c === null)
        throw new ArgumentError(`checks[${i}]`, 'expected { policy, key, cost? }');
      if (c.route !== undefined && typeof c.route !== 'string') {
        throw new ArgumentError(`checks[${i}].route`, `expected a string, got ${typeof c.route}`);
      }
      if (c.shadow !== undefined && typeof c.shadow !== 'boolean') {
        throw new ArgumentError(`checks[${i}].shadow`, `expected a boolean, got ${typeof c.shadow}`);
      }
      return {
        rule: this.#rule(c.policy, `checks[${i}].policy`),
        key: this.#key(c.key, `checks[${i}].key`),
        cost: checkCost(c.cost ?? 1, `checks[${i}].cost`),
        check: c,
      };
    });
    const settled = await Promise.allSettled(
      checks.map((c) => this.#consumeOne(c.rule, c.key, c.cost, c.check)),
    );
    const decisions = settled.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
    const failure = settled.find((s) => s.status === 'rejected');
    const denied = decisions.filter((d) => !d.allowed);
    if (failure === undefined && denied.length === 0) return { ...tightest(decisions), checks: decisions };
    const now = this.#now();
    checks.forEach((c, i) => {
      const s = settled[i];
      if (s?.status === 'fulfilled' && s.value.allowed) this.#refund(c.rule, c.key, c.cost, now, s.value);
    });
    if (failure) throw failure.reason;
    // The allowed rules were refunded, so each reports what is left after the refund.
    const each = decisions.map((d, i) => {
      if (!d.allowed) return d;
      const { rule, cost } = checks[i]!;
      const remaining = Math.min(d.limit, d.remaining + cost);
      return { ...d, remaining, resetMs: Math.ceil((rule.burst - remaining) / rule.ratePerMs) };
    });
    return { ...latestRetry(denied), checks: each };
  }

  /**
   * What a policy allows, for response headers (e.g. `RateLimit-Policy: "per-key";q=100;w=1`):
   * its limit and the whole seconds it takes to restore the limit from empty.
   */
  describe(policy: string): PolicyDescription {
    const rule = this.#rule(policy, 'policy');
    return {
      limit: rule.burst,
      windowSeconds: Math.max(1, Math.ceil(rule.burst / rule.ratePerMs / 1000)),
    };
  }

  /**
   * Replaces the policies without a restart. Validated eagerly: on a `ConfigError` nothing changes.
   * A policy whose compiled rule is unchanged keeps its local state and leases; a changed or removed
   * one hands its leased tokens back (the shared bucket under the same name carries on).
   */
  setPolicies(policies: Record<string, PolicyConfig>): void {
    if (this.#closing) throw new ClosedError('Limiter');
    const next = compilePolicies(policies);
    for (const [name, rule] of this.#rules) {
      const fresh = next.get(name);
      if (fresh && JSON.stringify(fresh) === JSON.stringify(rule)) next.set(name, rule);
    }
    this.#rules = next;
    const stale = [...this.#entries.entries()].filter(([, e]) => next.get(e.rule.name) !== e.rule);
    for (const [id] of stale) this.#entries.delete(id); // dispose hands the unused tokens back
  }

  /** Hands back leases whose time is up. Runs on a timer unless `sweepIntervalMs` is 0. */
  sweep(): void {
    const now = this.#now();
    for (const [id, entry] of this.#entries.entries()) {
      if (entry.inflight) continue;
      if (entry.segments.length > 0 && now >= entry.expiresAt) this.#returnUnused(entry, 'expired');
      // An idle entry holds nothing worth keeping once its demand has decayed.
      if (
        entry.segments.length === 0 &&
        now >= entry.deniedUntil &&
        demandPerMs(entry.demand, now) * 1000 < 0.01
      ) {
        this.#entries.delete(id);
      }
    }
  }

  /** Counters for a health endpoint; cheap enough to call per request. */
  stats(): LimiterStats {
    const t = this.#telemetry.counts;
    return {
      ...this.#stats,
      ...t,
      outcomes: { ...t.outcomes },
      keys: this.#entries.size,
      ...this.#failover.stats,
      storeCallsSuspended: this.#failover.store.shortCircuited,
      breaker: this.#failover.store.state(),
    };
  }

  /**
   * The `n` keys of `policy` denied most often lately (see the `offenders` option), heaviest first:
   * the answer to "one abusive client, or a limit that cuts everyone?".
   */
  topDenied(policy: string, n = 10): HeavyHitter[] {
    return this.#telemetry.topDenied(this.#rule(policy, 'policy').name, n);
  }

  /** Hands every unused leased token back and stops. Idempotent; the store is left open. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      clearInterval(this.#timer);
      await this.#settle();
      this.#entries.clear(); // dispose returns each entry's unused tokens
      await this.#settle();
      await this.#failover.flush(); // what a fallback admitted, if the store is back
      this.#telemetry.close();
    })();
    return this.#closing;
  }

  async #settle(): Promise<void> {
    while (this.#pending.size > 0) await Promise.allSettled([...this.#pending]);
  }

  #rule(name: unknown, field: string): Rule {
    const rule = typeof name === 'string' ? this.#rules.get(name) : undefined;
    if (!rule) {
      const known = [...this.#rules.keys()].map((k) => JSON.stringify(k)).join(', ');
      throw new ArgumentError(field, `unknown policy ${JSON.stringify(name)}; known policies: ${known}`);
    }
    return rule;
  }

  #key(key: unknown, field: string): string {
    if (typeof key !== 'string') throw new ArgumentError(field, `expected a string, got ${typeof key}`);
    return key;
  }

  #entry(rule: Rule, key: string): Entry {
    const id = storageKey(rule.algorithm, rule.name, key);
    let entry = this.#entries.get(id);
    if (!entry) {
      entry = {
        rule,
        key,
        storageKey: id,
        segments: [],
        expiresAt: 0,
        demand: { sum: 0, at: this.#now() },
        lastGrant: 0,
        deniedUntil: 0,
        deniedCost: 0,
        level: rule.burst,
        levelAt: this.#now(),
        inflight: undefined,
        fallback: this.#failover.state(rule, key, id, this.#now()),
      };
      this.#entries.set(id, entry);
    }
    return entry;
  }

  /** `check`: the caller's check of a multi-rule consume, for what observers hear (route, shadow). */
  async #consumeOne(rule: Rule, key: string, cost: number, check?: Check): Promise<Decision> {
    this.#stats.decisions++;
    const entry = this.#entry(rule, key);
    noteDemand(entry.demand, this.#now(), cost);
    if (cost > rule.burst) {
      return this.#answer(0, cost, check, this.#deny(entry, this.#now(), Number.POSITIVE_INFINITY, 'lease'));
    }
    if (rule.exact) return this.#consumeExact(entry, cost, check);
    for (let attempt = 0; ; attempt++) {
      const now = this.#now();
      const source = attempt === 0 ? 'lease' : 'store';
      if (entry.segments.length > 0 && now >= entry.expiresAt && !entry.inflight) {
        this.#returnUnused(entry, 'expired');
      }
      if (lease.take(entry.segments, now, cost)) {
        this.#refillAhead(entry, now);
        return this.#answer(attempt, cost, check, this.#allow(entry, now, source));
      }
      // Tokens already reserved for us exist later: the shared bucket is empty until then.
      const wait = lease.msUntilAvailable(entry.segments, now, cost);
      if (Number.isFinite(wait)) {
        return this.#answer(attempt, cost, check, this.#deny(entry, now, wait, source));
      }
      if (now < entry.deniedUntil && cost >= entry.deniedCost) {
        return this.#answer(attempt, cost, check, this.#deny(entry, now, entry.deniedUntil - now, source));
      }
      if (attempt === MAX_ATTEMPTS) {
        return this.#answer(attempt, cost, check, this.#deny(entry, now, cost / rule.ratePerMs, source));
      }
      const acquired = this.#acquire(entry, cost - lease.unused(entry.segments));
      // While the store is suspended no request waits on it: the call is at most a probe, and its
      // lease (if the store is back) serves the requests that come after it.
      if (this.#failover.store.suspended(entry.storageKey)) {
        acquired.catch(() => {});
        return this.#fallback(attempt, entry, cost, check);
      }
      try {
        await acquired;
      } catch (err) {
        return this.#fallback(attempt + 1, entry, cost, check, err);
      }
    }
  }

  /** Exact mode: one store call per decision, nothing held locally but the deny cache. */
  async #consumeExact(entry: Entry, cost: number, check: Check | undefined): Promise<Decision> {
    const now = this.#now();
    if (now < entry.deniedUntil && cost >= entry.deniedCost) {
      return this.#answer(0, cost, check, this.#deny(entry, now, entry.deniedUntil - now, 'lease'));
    }
    const { rule } = entry;
    const request = {
      rate: rule.rate,
      periodMs: rule.periodMs,
      burst: rule.burst,
      want: cost,
      min: cost,
      ahead: 0,
    };
    this.#stats.storeCalls++;
    let result: AcquireResult;
    try {
      result = await this.#gate(() => this.#store.run(tokenBucketAcquire, entry.storageKey, request));
    } catch (err) {
      this.#stats.storeErrors++;
      return this.#fallback(1, entry, cost, check, err);
    }
    const at = this.#now();
    entry.level = result.levelBefore - result.granted;
    entry.levelAt = at;
    if (result.granted > 0) {
      this.#failover.granted(entry.fallback, result.granted, at);
      return this.#answer(1, cost, check, this.#allow(entry, at, 'store'));
    }
    entry.deniedUntil = at + msUntilRoom(result.levelBefore, request);
    entry.deniedCost = cost;
    return this.#answer(1, cost, check, this.#deny(entry, at, entry.deniedUntil - at, 'store'));
  }

  /** The store failed or is suspended: the rule's fail policy decides (README "Failure behaviour"). */
  #fallback(
    storeWaits: number,
    entry: Entry,
    cost: number,
    check: Check | undefined,
    err?: unknown,
  ): Decision {
    if (err !== undefined && !(err instanceof TokenleaseError)) throw err;
    const now = this.#now();
    const { remaining } = this.#decision(entry, now, true, 0, 'fallback');
    return this.#answer(storeWaits, cost, check, this.#failover.decide(entry.fallback, cost, now, remaining));
  }

  /** `storeWaits`: store calls this decision waited for (0: answered locally). */
  #answer(storeWaits: number, cost: number, check: Check | undefined, decision: Decision): Decision {
    if (storeWaits === 0) this.#stats.localDecisions++;
    const outcome =
      decision.source === 'fallback'
        ? decision.allowed
          ? 'failed-open'
          : 'failed-closed'
        : decision.allowed
          ? 'allowed'
          : check?.shadow
            ? 'shadow-denied'
            : 'denied';
    this.#telemetry.decided(decision, cost, check?.route, decision.source ?? 'lease', outcome);
    return decision;
  }

  /** Starts the next lease before this one runs out, so the hot path rarely waits on the store. */
  #refillAhead(entry: Entry, now: number): void {
    const { rule } = entry;
    if (rule.exact || entry.inflight || now < entry.deniedUntil) return;
    if (lease.unused(entry.segments) > Math.ceil(entry.lastGrant / 4)) return;
    this.#acquire(entry, 1).catch(() => {});
  }

  /** Single-flight: concurrent misses for one key share one store call. */
  #acquire(entry: Entry, min: number): Promise<void> {
    if (entry.inflight) return entry.inflight;
    const { rule } = entry;
    const want = this.#leaseSize(entry, min);
    const request = {
      rate: rule.rate,
      periodMs: rule.periodMs,
      burst: rule.burst,
      want,
      min: Math.min(min, want),
      ahead: rule.ahead,
    };
    this.#stats.storeCalls++;
    const call = this.#gate(() => this.#store.run(tokenBucketAcquire, entry.storageKey, request))
      .then((result) => {
        const now = this.#now();
        entry.level = result.levelBefore - result.granted;
        entry.levelAt = now;
        if (result.granted === 0) {
          entry.deniedUntil = now + msUntilRoom(result.levelBefore, request);
          entry.deniedCost = request.min;
          return;
        }
        this.#stats.leasesGranted++;
        this.#stats.tokensLeased += result.granted;
        this.#telemetry.leaseGranted(rule.name, entry.key, result.granted);
        this.#failover.granted(entry.fallback, result.granted, now);
        entry.lastGrant = result.granted;
        entry.deniedUntil = 0;
        entry.segments.push({
          at: now,
          levelBefore: result.levelBefore,
          size: result.granted,
          ratePerMs: rule.ratePerMs,
          used: 0,
        });
        entry.expiresAt = lease.fullyCoveredAt(entry.segments) + rule.leaseTtlMs;
        // Evicted or closed while the call was in flight: nobody will spend these tokens.
        if (this.#entries.peek(entry.storageKey) !== entry) this.#returnUnused(entry, 'orphaned');
      })
      .catch((err: unknown) => {
        this.#stats.storeErrors++;
        throw err;
      })
      .finally(() => {
        entry.inflight = undefined;
      });
    entry.inflight = call;
    this.#track(call);
    return call;
  }

  /**
   * Lease size: this instance's demand over the horizon, doubling from 1 for a key without history
   * (slow start), at most `maxLease` (about 10 % of the limit), and never below what is waiting.
   */
  #leaseSize(entry: Entry, min: number): number {
    const { rule } = entry;
    if (rule.exact) return min;
    const demand = Math.ceil(demandPerMs(entry.demand, this.#now()) * rule.horizonMs);
    const slowStart = Math.max(1, entry.lastGrant * 2);
    return Math.max(min, Math.min(rule.maxLease, slowStart, Math.max(1, demand)));
  }

  #returnUnused(entry: Entry, reason: ReturnReason): void {
    const tokens = lease.unused(entry.segments);
    entry.segments = [];
    if (tokens <= 0) return;
    const { rule } = entry;
    this.#stats.storeCalls++;
    this.#stats.tokensReturned += tokens;
    this.#telemetry.leaseReturned(rule.name, entry.key, tokens, reason);
    const request = { rate: rule.rate, periodMs: rule.periodMs, burst: rule.burst, tokens };
    this.#track(
      this.#gate(() => this.#store.run(tokenBucketRelease, entry.storageKey, request)).catch(() => {
        this.#stats.storeErrors++;
        this.#telemetry.stranded(rule.name, entry.key, tokens);
      }),
    );
  }

  #refund(rule: Rule, key: string, cost: number, now: number, decision: Decision): void {
    const entry = this.#entries.peek(storageKey(rule.algorithm, rule.name, key));
    if (!entry) return;
    if (decision.source === 'fallback') this.#failover.refund(entry.fallback, cost, now);
    else lease.refund(entry.segments, now, cost);
  }

  #track(promise: Promise<unknown>): void {
    const tracked = promise.catch(() => {});
    this.#pending.add(tracked);
    tracked.finally(() => this.#pending.delete(tracked));
  }

  #globalLevel(entry: Entry, now: number): number {
    const { rule } = entry;
    return Math.min(rule.burst, entry.level + Math.max(0, now - entry.levelAt) * rule.ratePerMs);
  }

  #decision(
    entry: Entry,
    now: number,
    allowed: boolean,
    retryAfterMs: number,
    source: DecisionSource,
  ): Decision {
    const { rule } = entry;
    const estimate = this.#globalLevel(entry, now) + lease.available(entry.segments, now);
    const remaining = Math.max(0, Math.min(rule.burst, Math.floor(estimate)));
    return {
      allowed,
      policy: rule.name,
      key: entry.key,
      limit: rule.burst,
      remaining,
      resetMs: Math.ceil((rule.burst - remaining) / rule.ratePerMs),
      retryAfterMs,
      source,
    };
  }

  #allow(entry: Entry, now: number, source: DecisionSource): Decision {
    return this.#decision(entry, now, true, 0, source);
  }

  #deny(entry: Entry, now: number, retryAfterMs: number, source: DecisionSource): Decision {
    return this.#decision(
      entry,
      now,
      false,
      retryAfterMs === Number.POSITIVE_INFINITY ? retryAfterMs : Math.ceil(retryAfterMs),
      source,
    );
  }
}
