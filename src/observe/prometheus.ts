/**
 * Prometheus metrics for tokenlease, through `prom-client` (an optional peer dependency: only this
 * module, imported as `tokenlease/prometheus`, loads it).
 *
 * Labels are low-cardinality by construction: policy names (configuration), outcomes, sources,
 * reasons, store operations, error codes and ranks. Client keys never become labels — the top
 * offenders are exported by rank, and named only by `limiter.topDenied()`. Decision counts are the
 * limiters' own plain numbers, set on the counters when scraped (see `totals.ts`): metrics add
 * nothing to a decision.
 */
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { ConfigError, shown } from '../errors.js';
import { knownOptions } from '../options.js';
import type { LeaseEvent, ObservedLimiter, Observer, StoreCallEvent } from './events.js';
import { breakerStates, DecisionTotals, localKeys, rankDenials, summedDecisions } from './totals.js';

export interface PrometheusObserverOptions {
  /**
   * Where the metrics are registered. Required: tokenlease never writes to prom-client's global
   * default registry. One observer per registry; share it between limiters.
   */
  registry: Registry;
  /**
   * Prepended to every metric name.
   * @default 'tokenlease_'
   */
  prefix?: string;
  /**
   * Buckets of the store latency histogram, in seconds.
   * @default [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1]
   */
  buckets?: number[];
  /**
   * Ranks exported per policy by the top-denied gauges (a fixed label set: policies × ranks).
   * @default 5
   */
  topN?: number;
}

/** An observer that also owns its metrics; pass it in `LimiterOptions.observers`. */
export interface PrometheusObserver extends Observer {
  readonly registry: Registry;
}

const DEFAULT_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1];

function checkOptions(
  options: PrometheusObserverOptions,
): Required<Omit<PrometheusObserverOptions, 'registry'>> {
  if (typeof options !== 'object' || options === null) throw new ConfigError('options', 'expected an object');
  knownOptions(options, ['registry', 'prefix', 'buckets', 'topN']);
  const { registry, prefix = 'tokenlease_', buckets = DEFAULT_BUCKETS, topN = 5 } = options;
  if (typeof registry !== 'object' || registry === null || typeof registry.registerMetric !== 'function') {
    throw new ConfigError('registry', "expected a prom-client Registry (new Registry() from 'prom-client')");
  }
  if (typeof prefix !== 'string' || !/^[a-zA-Z_:][a-zA-Z0-9_:]*$|^$/.test(prefix)) {
    throw new ConfigError(
      'prefix',
      `expected a Prometheus metric name prefix like 'tokenlease_', got ${shown(prefix)}`,
    );
  }
  if (
    !Array.isArray(buckets) ||
    buckets.length === 0 ||
    buckets.some((b) => !(b > 0) || !Number.isFinite(b))
  ) {
    throw new ConfigError('buckets', 'expected a non-empty array of positive finite seconds');
  }
  if (typeof topN !== 'number' || !Number.isInteger(topN) || topN < 0 || topN > 100) {
    throw new ConfigError('topN', `expected an integer from 0 to 100, got ${shown(topN)}`);
  }
  // Checked before registering anything: prom-client would throw its own Error part of the way
  // through, leaving some of this observer's metrics registered.
  if (registry.getSingleMetric(`${prefix}decisions_total`)) {
    throw new ConfigError(
      'registry',
      `it already has ${prefix}decisions_total: give one observer to every limiter (observers: [observer]), or this one another prefix`,
    );
  }
  return { prefix, buckets, topN };
}

/**
 * Registers tokenlease's metrics in `registry` and returns the observer that feeds them:
 *
 * ```ts
 * import { Registry } from 'prom-client';
 * import { prometheusObserver } from 'tokenlease/prometheus';
 * const registry = new Registry();
 * const limiter = new Limiter({ policies, observers: [prometheusObserver({ registry })] });
 * // GET /metrics: res.end(await registry.metrics())
 * ```
 */
export function prometheusObserver(options: PrometheusObserverOptions): PrometheusObserver {
  const { prefix, buckets, topN } = checkOptions(options);
  const registers = [options.registry];
  const limiters = new Set<ObservedLimiter>();

  /** The decision counts of limiters it was attached to and no longer is. */
  const retired = new DecisionTotals();
  new Counter({
    name: `${prefix}decisions_total`,
    help: 'Limit decisions, one per rule checked, by policy, outcome and what answered (lease, store, fallback).',
    labelNames: ['policy', 'outcome', 'source'],
    registers,
    collect() {
      this.reset();
      for (const [labels, n] of summedDecisions(limiters, retired).decisionCounts()) this.inc(labels, n);
    },
  });
  new Counter({
    name: `${prefix}rate_limited_total`,
    help: 'Denied decisions by policy and reason (limit: bucket empty; cost-above-limit: can never pass).',
    labelNames: ['policy', 'reason'],
    registers,
    collect() {
      this.reset();
      for (const [labels, n] of summedDecisions(limiters, retired).denialCounts()) this.inc(labels, n);
    },
  });

  const storeCalls = new Counter({
    name: `${prefix}store_calls_total`,
    help: 'Calls to the shared store by operation.',
    labelNames: ['op'],
    registers,
  });
  const storeErrors = new Counter({
    name: `${prefix}store_errors_total`,
    help: 'Failed store calls by operation and error code.',
    labelNames: ['op', 'code'],
    registers,
  });
  const storeSeconds = new Histogram({
    name: `${prefix}store_call_duration_seconds`,
    help: 'Store call latency (failed calls included) by operation.',
    labelNames: ['op'],
    buckets,
    registers,
  });
  const leasesGranted = new Counter({
    name: `${prefix}leases_granted_total`,
    help: 'Leases granted to this process by the store.',
    labelNames: ['policy'],
    registers,
  });
  const leasesReturned = new Counter({
    name: `${prefix}leases_returned_total`,
    help: 'Leases whose unused tokens were handed back, by reason (expired, evicted, closed, orphaned).',
    labelNames: ['policy', 'reason'],
    registers,
  });
  const tokensLeased = new Counter({
    name: `${prefix}leased_tokens_total`,
    help: 'Tokens leased from the store.',
    labelNames: ['policy'],
    registers,
  });
  const tokensReturned = new Counter({
    name: `${prefix}returned_tokens_total`,
    help: 'Unused leased tokens handed back to the store.',
    labelNames: ['policy'],
    registers,
  });
  const tokensStranded = new Counter({
    name: `${prefix}stranded_tokens_total`,
    help: 'Tokens whose return to the store failed: missing from the shared bucket until it refills.',
    labelNames: ['policy'],
    registers,
  });
  new Gauge({
    name: `${prefix}breaker_state`,
    help: 'Limiters whose store circuit breaker is in each state (one limiter: 1 for its state, 0 for the others).',
    labelNames: ['state'],
    registers,
    collect() {
      this.reset();
      for (const [state, n] of breakerStates(limiters) ?? []) this.set({ state }, n);
    },
  });
  new Gauge({
    name: `${prefix}local_keys`,
    help: 'Entries in the local lease table (policy, key pairs held in memory).',
    registers,
    collect() {
      this.set(localKeys(limiters));
    },
  });
  const topDenied = new Gauge({
    name: `${prefix}top_denied`,
    help: 'Recent denials (decayed count) of the rank-th most denied key of each policy; keys are not exported.',
    labelNames: ['policy', 'rank'],
    registers,
    collect: () => collectTop(),
  });
  const topShare = new Gauge({
    name: `${prefix}top_denied_share`,
    help: "The rank-th most denied key's share of its policy's recent denials (near 1: one client; spread: the limit).",
    labelNames: ['policy', 'rank'],
    registers,
    collect: () => collectTop(),
  });

  // Sets both top gauges: each one's collect calls it, so either can be read alone.
  function collectTop(): void {
    topDenied.reset();
    topShare.reset();
    for (const r of rankDenials(limiters, topN)) {
      const labels = { policy: r.policy, rank: String(r.rank) };
      topDenied.set(labels, r.count);
      topShare.set(labels, r.share);
    }
  }

  const observer: PrometheusObserver = {
    registry: options.registry,
    storeCall(e: StoreCallEvent): void {
      storeCalls.inc({ op: e.op });
      storeSeconds.observe({ op: e.op }, e.seconds);
      if (e.errorCode !== undefined) storeErrors.inc({ op: e.op, code: e.errorCode });
    },
    lease(e: LeaseEvent): void {
      const policy = { policy: e.policy };
      switch (e.kind) {
        case 'granted':
          leasesGranted.inc(policy);
          tokensLeased.inc(policy, e.tokens);
          return;
        case 'returned':
          leasesReturned.inc({ policy: e.policy, reason: e.reason });
          tokensReturned.inc(policy, e.tokens);
          return;
        case 'stranded':
          tokensStranded.inc(policy, e.tokens);
          return;
      }
    },
    attach(limiter: ObservedLimiter): void {
      limiters.add(limiter);
    },
    detach(limiter: ObservedLimiter): void {
      // Its decisions stay counted: counters never go down.
      if (limiters.delete(limiter) && limiter.decisions !== undefined) retired.addAll(limiter.decisions);
    },
  };
  return observer;
}
