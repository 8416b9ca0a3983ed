/**
 * Prometheus metrics for tokenlease, through `prom-client` (an optional peer dependency: only this
 * module, imported as `tokenlease/prometheus`, loads it).
 *
 * Labels are low-cardinality by construction: policy names (configuration), outcomes, sources,
 * reasons, store operations, error codes and ranks. Client keys never become labels — the top
 * offenders are exported by rank, and named only by `limiter.topDenied()`. Decision counts are the
 * limiters' own plain numbers, set on the counters when scraped (see `totals.ts`): metrics add
 * nothing to a decision. The store-call and lease counters are this observer's own plain numbers
 * (`Tally`), likewise set when scraped; only the latency histogram is prom-client's per event.
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

  const tallied = (name: string, help: string, labelNames: [string] | [string, string]): Tally => {
    const tally = new Tally(labelNames);
    new Counter({
      name: `${prefix}${name}`,
      help,
      labelNames,
      registers,
      collect() {
        tally.writeTo(this);
      },
    });
    return tally;
  };
  const storeCalls = tallied('store_calls_total', 'Calls to the shared store by operation.', ['op']);
  const storeErrors = tallied('store_errors_total', 'Failed store calls by operation and error code.', [
    'op',
    'code',
  ]);
  const storeSeconds = new Histogram({
    name: `${prefix}store_call_duration_seconds`,
    help: 'Store call latency (failed calls included) by operation.',
    labelNames: ['op'],
    buckets,
    registers,
  });
  const leasesGranted = tallied('leases_granted_total', 'Leases granted to this process by the store.', [
    'policy',
  ]);
  const leasesReturned = tallied(
    'leases_returned_total',
    'Leases whose unused tokens were handed back, by reason (expired, evicted, closed, orphaned).',
    ['policy', 'reason'],
  );
  const tokensLeased = tallied('leased_tokens_total', 'Tokens leased from the store.', ['policy']);
  const tokensReturned = tallied('returned_tokens_total', 'Unused leased tokens handed back to the store.', [
    'policy',
  ]);
  const tokensStranded = tallied(
    'stranded_tokens_total',
    'Tokens whose return to the store failed: missing from the shared bucket until it refills.',
    ['policy'],
  );
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
      const op = storeCalls.add(e.op, 1);
      storeSeconds.observe(op.labels, e.seconds);
      if (e.errorCode !== undefined) storeErrors.add(e.op, 1, e.errorCode);
    },
    lease(e: LeaseEvent): void {
      switch (e.kind) {
        case 'granted':
          leasesGranted.add(e.policy, 1);
          tokensLeased.add(e.policy, e.tokens);
          return;
        case 'returned':
          leasesReturned.add(e.policy, 1, e.reason);
          tokensReturned.add(e.policy, e.tokens);
          return;
        case 'stranded':
          tokensStranded.add(e.policy, e.tokens);
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

interface Tallied {
  /** The series' labels, built once. */
  readonly labels: Partial<Record<string, string>>;
  n: number;
}

/**
 * A counter's values in plain numbers, by label values, written to the counter when it is
 * collected. prom-client's `inc` checks and hashes its label object on every call (~120 ns), more
 * than the rest of an observed store call's bookkeeping; here an event costs a map lookup by the
 * value of its first label (a name from the configuration or the code, never a client key).
 */
class Tally {
  readonly #labelNames: [string] | [string, string];
  /** By first label value, then second (or '' for a one-label counter). */
  readonly #series = new Map<string, Map<string, Tallied>>();
  /** Every series, in the order they first appeared (prom-client's own order). */
  readonly #all: Tallied[] = [];

  constructor(labelNames: [string] | [string, string]) {
    this.#labelNames = labelNames;
  }

  /** Adds `n` to the series of these label values; returns it (its `labels` reusable elsewhere). */
  add(first: string, n: number, second = ''): Tallied {
    let bySecond = this.#series.get(first);
    if (bySecond === undefined) {
      bySecond = new Map();
      this.#series.set(first, bySecond);
    }
    let s = bySecond.get(second);
    if (s === undefined) {
      const [a, b] = this.#labelNames;
      s = { labels: b === undefined ? { [a]: first } : { [a]: first, [b]: second }, n: 0 };
      bySecond.set(second, s);
      this.#all.push(s);
    }
    s.n += n;
    return s;
  }

  /** Sets `counter` (on a scrape) to what was counted, series in the order they first appeared. */
  writeTo(counter: Counter): void {
    counter.reset();
    for (const s of this.#all) counter.inc(s.labels, s.n);
  }
}
