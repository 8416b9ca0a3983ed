import type { Decision } from '../decision.js';
import { type Duration, parseDuration } from '../duration.js';
import { ArgumentError, ConfigError, shown, TokenleaseError } from '../errors.js';
import { countOption, isOptionsObject, knownOptions } from '../options.js';
import type { Operation, RunOptions, Store } from '../stores/store.js';
import type {
  BreakerEvent,
  BreakerState,
  DecisionEvent,
  DenyReason,
  LeaseEvent,
  LimiterStats,
  ObservedLimiter,
  Observer,
  Outcome,
  ReturnReason,
  Source,
  StoreCallEvent,
  TelemetryCounts,
} from './events.js';
import { type HeavyHitter, SpaceSaving } from './spaceSaving.js';
import { DecisionTotals, type PolicyCounts } from './totals.js';

/** The heavy-hitters sketch of denied keys behind `limiter.topDenied()`. */
export interface OffendersOptions {
  /**
   * Counters kept per policy. Any key with more than 1/capacity of a policy's recent denials is
   * certain to be listed; the list is exact in practice for the top few of a skewed flood. At most
   * 100 000: the sketch keeps this many keys per policy.
   * @default 256
   */
  capacity?: number;
  /** Denials older than this weigh half as much, so the list follows who is denied now. @default '1m' */
  halfLife?: Duration;
}

interface TelemetryOptions {
  observers: unknown;
  offenders: unknown;
  now: () => number;
  /** The current policy names. */
  policies: () => readonly string[];
  stats: () => LimiterStats;
}

const LATENCY_WEIGHT = 0.1;

function readObservers(value: unknown): Observer[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) throw new ConfigError('observers', 'expected an array of observers');
  value.forEach((o, i) => {
    if (typeof o !== 'object' || o === null) {
      throw new ConfigError(
        `observers[${i}]`,
        'expected an object with optional decision/storeCall/lease/breaker methods',
      );
    }
  });
  return value as Observer[];
}

/** Most denied keys a policy's sketch keeps: the bound on its memory. */
const MAX_CAPACITY = 100_000;

function readOffenders(value: unknown): ((now: number) => SpaceSaving) | undefined {
  if (value === false) return undefined;
  if (value !== undefined && !isOptionsObject(value)) {
    throw new ConfigError('offenders', 'expected { capacity?, halfLife? } or false');
  }
  const raw = (value ?? {}) as OffendersOptions;
  knownOptions(raw, ['capacity', 'halfLife'], 'offenders');
  const capacity = countOption(
    raw.capacity ?? 256,
    'offenders.capacity',
    MAX_CAPACITY,
    'denied keys kept per policy',
  );
  const halfLifeMs = parseDuration(raw.halfLife ?? '1m', 'offenders.halfLife');
  return (now) => new SpaceSaving(capacity, halfLifeMs, now);
}

/**
 * The limiter's one point of contact with observers: it keeps the counters behind `stats()`, the
 * denied-keys sketch behind `topDenied()`, and turns the limiter's calls into events only when an
 * observer wants that kind of event.
 */
export class Telemetry {
  /** Every decision by policy, outcome and source (`stats().outcomes` sums them). */
  readonly totals = new DecisionTotals();
  readonly counts: Omit<TelemetryCounts, 'outcomes'> = {
    leasesReturned: 0,
    leasesExpired: 0,
    tokensStranded: 0,
    storeLatencyMs: 0,
    breaker: undefined,
  };
  readonly #now: () => number;
  readonly #observers: readonly Observer[];
  readonly #onDecision: Observer[];
  readonly #onStoreCall: Observer[];
  readonly #onLease: Observer[];
  readonly #onBreaker: Observer[];
  readonly #faulty = new WeakSet<Observer>();
  /** Per policy, created on its first denial; undefined when `offenders: false`. */
  readonly #newSketch: ((now: number) => SpaceSaving) | undefined;
  readonly #offenders = new Map<string, SpaceSaving>();
  readonly #view: ObservedLimiter;

  constructor(options: TelemetryOptions) {
    this.#now = options.now;
    this.#observers = readObservers(options.observers);
    this.#onDecision = this.#observers.filter((o) => typeof o.decision === 'function');
    this.#onStoreCall = this.#observers.filter((o) => typeof o.storeCall === 'function');
    this.#onLease = this.#observers.filter((o) => typeof o.lease === 'function');
    this.#onBreaker = this.#observers.filter((o) => typeof o.breaker === 'function');
    this.#newSketch = readOffenders(options.offenders);
    this.#view = {
      get policies() {
        return options.policies();
      },
      decisions: this.totals,
      stats: options.stats,
      offenders: (policy, n) => {
        const sketch = this.#offenders.get(policy);
        const now = this.#now();
        return { total: sketch?.total(now) ?? 0, top: sketch?.top(n, now) ?? [] };
      },
    };
    for (const o of this.#observers) {
      try {
        o.attach?.(this.#view);
      } catch (err) {
        this.#fault(o, err);
      }
    }
  }

  /** Whether an observer receives decision events (fixed at construction). */
  get observesDecisions(): boolean {
    return this.#onDecision.length > 0;
  }

  /**
   * Reports one rule's decision, counted into `counts` (`totals.of(decision.policy)`, which the
   * caller may keep). `outcome` defaults to what the decision says.
   */
  decided(
    counts: PolicyCounts,
    decision: Decision,
    cost: number,
    route: string | undefined,
    source: Source,
    outcome: Outcome = decision.allowed ? 'allowed' : 'denied',
  ): void {
    const denied = outcome === 'denied' || outcome === 'shadow-denied';
    if (denied && this.#newSketch) {
      const now = this.#now();
      let sketch = this.#offenders.get(decision.policy);
      if (sketch === undefined) {
        sketch = this.#newSketch(now);
        this.#offenders.set(decision.policy, sketch);
      }
      sketch.offer(decision.key, 1, now);
    }
    const reason: DenyReason | undefined = !denied
      ? undefined
      : decision.retryAfterMs === Number.POSITIVE_INFINITY
        ? 'cost-above-limit'
        : 'limit';
    counts.count(outcome, source, reason);
    if (this.#onDecision.length === 0) return;
    const event: DecisionEvent = {
      policy: decision.policy,
      key: decision.key,
      route,
      cost,
      outcome,
      source,
      reason,
      limit: decision.limit,
      remaining: decision.remaining,
      retryAfterMs: decision.retryAfterMs,
    };
    for (const o of this.#onDecision) {
      try {
        o.decision!(event);
      } catch (err) {
        this.#fault(o, err);
      }
    }
  }

  leaseGranted(policy: string, key: string, tokens: number): void {
    if (this.#onLease.length > 0) this.#lease({ kind: 'granted', policy, key, tokens });
  }

  leaseReturned(policy: string, key: string, tokens: number, reason: ReturnReason): void {
    this.counts.leasesReturned++;
    if (reason === 'expired') this.counts.leasesExpired++;
    if (this.#onLease.length > 0) this.#lease({ kind: 'returned', policy, key, tokens, reason });
  }

  stranded(policy: string, key: string, tokens: number): void {
    this.counts.tokensStranded += tokens;
    if (this.#onLease.length > 0) this.#lease({ kind: 'stranded', policy, key, tokens });
  }

  /** For a circuit breaker in front of the store: report each state change. */
  breaker(state: BreakerState): void {
    this.counts.breaker = state;
    const event: BreakerEvent = { state };
    for (const o of this.#onBreaker) {
      try {
        o.breaker!(event);
      } catch (err) {
        this.#fault(o, err);
      }
    }
  }

  topDenied(policy: string, n: number): HeavyHitter[] {
    if (typeof n !== 'number' || !Number.isInteger(n) || n < 0) {
      throw new ArgumentError('n', `expected an integer from 0 and up, got ${shown(n)}`);
    }
    return this.#offenders.get(policy)?.top(n, this.#now()) ?? [];
  }

  /** Wraps the store so every call is timed (wall clock: latency is real even under a virtual `now`). */
  instrument(store: Store): Store {
    const run = <S, Req, Res>(
      op: Operation<S, Req, Res>,
      key: string,
      req: Req,
      options?: RunOptions,
    ): Promise<Res> => {
      const start = performance.now();
      return store.run(op, key, req, options).then(
        (result) => {
          this.#storeCall(op.script, performance.now() - start, undefined);
          return result;
        },
        (err: unknown) => {
          const code = err instanceof TokenleaseError ? err.code : 'unknown';
          this.#storeCall(op.script, performance.now() - start, code);
          throw err;
        },
      );
    };
    // shardOf passes through: the breakers in front of this store suspend calls per shard.
    return { run, close: () => store.close(), shardOf: store.shardOf?.bind(store) };
  }

  close(): void {
    for (const o of this.#observers) {
      try {
        o.detach?.(this.#view);
      } catch (err) {
        this.#fault(o, err);
      }
    }
  }

  #storeCall(op: string, ms: number, errorCode: string | undefined): void {
    const c = this.counts;
    c.storeLatencyMs =
      c.storeLatencyMs === 0 ? ms : c.storeLatencyMs + LATENCY_WEIGHT * (ms - c.storeLatencyMs);
    if (this.#onStoreCall.length === 0) return;
    const event: StoreCallEvent = { op, seconds: ms / 1000, errorCode };
    for (const o of this.#onStoreCall) {
      try {
        o.storeCall!(event);
      } catch (err) {
        this.#fault(o, err);
      }
    }
  }

  #lease(event: LeaseEvent): void {
    for (const o of this.#onLease) {
      try {
        o.lease!(event);
      } catch (err) {
        this.#fault(o, err);
      }
    }
  }

  /** A throwing observer must not fail the request that triggered it; say so once, not per call. */
  #fault(observer: Observer, err: unknown): void {
    if (this.#faulty.has(observer)) return;
    this.#faulty.add(observer);
    process.emitWarning(
      `A tokenlease observer threw (further errors from it are not reported): ${String(err)}`,
      'TokenleaseObserverWarning',
    );
  }
}
