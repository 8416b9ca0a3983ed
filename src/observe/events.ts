import type { BreakerState } from '../breaker.js';
import type { HeavyHitter } from './spaceSaving.js';

/**
 * How a decision came out: `allowed`, `denied`, `shadow-denied` (a check marked `shadow: true`
 * that would have been denied), and `failed-open` / `failed-closed` (the store failed and the fail
 * policy answered, where one is configured).
 */
export type Outcome = 'allowed' | 'denied' | 'shadow-denied' | 'failed-open' | 'failed-closed';

/**
 * What answered: `lease` — local state only (leased tokens, or a denial remembered until its retry
 * time), no store call waited for; `store` — the decision waited on at least one store call;
 * `fallback` — the store was unavailable and the fail policy answered.
 */
export type Source = 'lease' | 'store' | 'fallback';

/** Why a request was denied: the bucket is empty (`limit`), or the cost exceeds the limit and never passes. */
export type DenyReason = 'limit' | 'cost-above-limit';

/** Why leased tokens went back to the store. */
export type ReturnReason = 'expired' | 'evicted' | 'closed' | 'orphaned' | 'reconfigured' | 'oversized';

/** One rule's decision. A multi-rule `consume` emits one per rule. */
export interface DecisionEvent {
  readonly policy: string;
  /** The client key. Never use it as a metric label: the set of keys is unbounded. */
  readonly key: string;
  /** The `route` of the check, when the caller passed one. */
  readonly route: string | undefined;
  readonly cost: number;
  readonly outcome: Outcome;
  readonly source: Source;
  /** Set when the outcome is `denied` or `shadow-denied`. */
  readonly reason: DenyReason | undefined;
  readonly limit: number;
  readonly remaining: number;
  readonly retryAfterMs: number;
}

/** One store call finished (successfully or not). Timed with the wall clock, not the limiter's `now`. */
export interface StoreCallEvent {
  /** The operation: its Lua script's name, e.g. `token_bucket_acquire`. */
  readonly op: string;
  readonly seconds: number;
  /** The failure's stable `code` (e.g. `ERR_TOKENLEASE_STORE_TIMEOUT`), `unknown` for a foreign error; undefined on success. */
  readonly errorCode: string | undefined;
}

export type LeaseEvent =
  /** The store granted `tokens` to this instance. */
  | { readonly kind: 'granted'; readonly policy: string; readonly key: string; readonly tokens: number }
  /** Unused leased tokens were handed back. */
  | {
      readonly kind: 'returned';
      readonly policy: string;
      readonly key: string;
      readonly tokens: number;
      readonly reason: ReturnReason;
    }
  /**
   * Handing tokens back failed: the shared bucket is short of them until it refills (under-admission,
   * never over-admission).
   */
  | { readonly kind: 'stranded'; readonly policy: string; readonly key: string; readonly tokens: number };

/** The breaker's states, as `src/breaker.ts` defines them. */
export type { BreakerState };

/** A circuit breaker in front of the store changed state. */
export interface BreakerEvent {
  readonly state: BreakerState;
}

/** Decision counts by label, cumulative (zeros left out). */
export interface DecisionCounts {
  decisionCounts(): Iterable<[{ policy: string; outcome: Outcome; source: Source }, number]>;
  /** Denials by reason (`denied` only, not `shadow-denied`). */
  denialCounts(): Iterable<[{ policy: string; reason: DenyReason }, number]>;
}

/** The counters `Telemetry` adds to `limiter.stats()`. */
export interface TelemetryCounts {
  /** Decisions by outcome (each rule of a multi-rule check counts once). */
  outcomes: Record<Outcome, number>;
  /** Leases whose unused tokens went back to the store, for any reason. */
  leasesReturned: number;
  /** Of `leasesReturned`, those handed back because their time was up. */
  leasesExpired: number;
  /** Tokens whose return to the store failed. */
  tokensStranded: number;
  /** Moving average (weight 0.1 per call) of store call latency in ms; 0 before the first call. */
  storeLatencyMs: number;
  /** Last state reported by a circuit breaker in front of the store; undefined when there is none. */
  breaker: BreakerState | undefined;
}

/** What `limiter.stats()` returns. */
export interface LimiterStats extends TelemetryCounts {
  /** Store calls made (acquisitions and returns). */
  storeCalls: number;
  storeErrors: number;
  leasesGranted: number;
  tokensLeased: number;
  tokensReturned: number;
  /**
   * Tokens admitted under write-behind allowances (first sights included). The store counts them
   * only when they are reported: `tokensAllowed - tokensReported` is what a crash now would leave
   * uncounted (over-admission, bounded by the allowance; docs/architecture.md "Guarantees").
   */
  tokensAllowed: number;
  /** Of `tokensAllowed`, those sent to the store in a report. */
  tokensReported: number;
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
  /**
   * Instances sharing the store as its heartbeats last counted them (0 until the count is in;
   * until then nothing is decided under an allowance). See docs/architecture.md "The fleet".
   */
  fleet: number;
}

/** What an observer can read from the limiter when it wants to (e.g. on a metrics scrape). */
export interface ObservedLimiter {
  /** The configured policy names (current: `setPolicies` may change them). */
  readonly policies: readonly string[];
  /**
   * Every decision the limiter made, counted by policy, outcome and source since it started (a
   * metrics adapter reads them on a scrape instead of counting events). Absent on a stand-in that
   * is not a `Limiter`.
   */
  readonly decisions?: DecisionCounts;
  stats(): LimiterStats;
  /** The `n` most denied keys of `policy` and the (decayed) weight of all its recent denials. */
  offenders(policy: string, n: number): { total: number; top: HeavyHitter[] };
}

/**
 * Receives the limiter's events. Every method is optional; a limiter with no observers builds no
 * event objects. Methods run synchronously on the hot path: keep them cheap (count, enqueue) and
 * never throw — an exception is caught and reported once per observer with `process.emitWarning`,
 * so a broken hook cannot fail a request.
 */
export interface Observer {
  decision?(event: DecisionEvent): void;
  storeCall?(event: StoreCallEvent): void;
  lease?(event: LeaseEvent): void;
  breaker?(event: BreakerEvent): void;
  /**
   * Called once by each limiter the observer is given to, while its constructor runs: keep the
   * reference and read it later (e.g. on a scrape).
   */
  attach?(limiter: ObservedLimiter): void;
  /** Called by `close()` on each limiter the observer was attached to. */
  detach?(limiter: ObservedLimiter): void;
}
