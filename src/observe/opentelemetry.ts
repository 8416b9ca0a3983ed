/**
 * OpenTelemetry metrics for tokenlease, on the `Meter` you pass (`@opentelemetry/api` is an optional
 * peer dependency; this module, imported as `tokenlease/opentelemetry`, uses only its types).
 *
 * The same measurements as `tokenlease/prometheus`, with the same low-cardinality attributes and no
 * client keys. Decision counts are observable counters read from the limiters' own plain totals at
 * collection time, so the hot path never calls into the SDK (nor counts anything for it).
 */
import type { Attributes, Meter } from '@opentelemetry/api';
import { ConfigError, shown } from '../errors.js';
import { knownOptions } from '../options.js';
import type { LeaseEvent, ObservedLimiter, Observer, StoreCallEvent } from './events.js';
import { breakerStates, DecisionTotals, localKeys, rankDenials, summedDecisions } from './totals.js';

export interface OpenTelemetryObserverOptions {
  /** Where the instruments are created, e.g. `metrics.getMeter('tokenlease')`. */
  meter: Meter;
  /**
   * Prepended to every instrument name.
   * @default 'tokenlease.'
   */
  prefix?: string;
  /**
   * Advised bucket boundaries of the store latency histogram, in seconds.
   * @default [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1]
   */
  buckets?: number[];
  /**
   * Ranks reported per policy by the top-denied gauges.
   * @default 5
   */
  topN?: number;
}

const DEFAULT_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1];

/** Creates tokenlease's instruments on `meter` and returns the observer that feeds them. */
export function openTelemetryObserver(options: OpenTelemetryObserverOptions): Observer {
  if (typeof options !== 'object' || options === null) throw new ConfigError('options', 'expected an object');
  knownOptions(options, ['meter', 'prefix', 'buckets', 'topN']);
  const { meter, prefix = 'tokenlease.', buckets = DEFAULT_BUCKETS, topN = 5 } = options;
  if (typeof meter !== 'object' || meter === null || typeof meter.createCounter !== 'function') {
    throw new ConfigError('meter', "expected an OpenTelemetry Meter (metrics.getMeter('tokenlease'))");
  }
  if (typeof prefix !== 'string') throw new ConfigError('prefix', `expected a string, got ${typeof prefix}`);
  if (!Array.isArray(buckets) || buckets.some((b) => !(b > 0) || !Number.isFinite(b))) {
    throw new ConfigError('buckets', 'expected an array of positive finite seconds');
  }
  if (typeof topN !== 'number' || !Number.isInteger(topN) || topN < 0 || topN > 100) {
    throw new ConfigError('topN', `expected an integer from 0 to 100, got ${shown(topN)}`);
  }
  const limiters = new Set<ObservedLimiter>();
  /** The decision counts of limiters it was attached to and no longer is. */
  const retired = new DecisionTotals();

  meter
    .createObservableCounter(`${prefix}decisions`, {
      description:
        'Limit decisions, one per rule checked, by policy, outcome and source (lease, store, fallback).',
      unit: '{decision}',
    })
    .addCallback((result) => {
      for (const [attributes, n] of summedDecisions(limiters, retired).decisionCounts())
        result.observe(n, attributes);
    });
  meter
    .createObservableCounter(`${prefix}rate_limited`, {
      description: 'Denied decisions by policy and reason (limit, cost-above-limit).',
      unit: '{decision}',
    })
    .addCallback((result) => {
      for (const [attributes, n] of summedDecisions(limiters, retired).denialCounts())
        result.observe(n, attributes);
    });
  const storeCalls = meter.createCounter(`${prefix}store.calls`, {
    description: 'Calls to the shared store by operation.',
    unit: '{call}',
  });
  const storeErrors = meter.createCounter(`${prefix}store.errors`, {
    description: 'Failed store calls by operation and error code.',
    unit: '{call}',
  });
  const storeDuration = meter.createHistogram(`${prefix}store.duration`, {
    description: 'Store call latency (failed calls included) by operation.',
    unit: 's',
    advice: { explicitBucketBoundaries: buckets },
  });
  const leasesGranted = meter.createCounter(`${prefix}leases.granted`, { unit: '{lease}' });
  const leasesReturned = meter.createCounter(`${prefix}leases.returned`, {
    description:
      'Leases whose unused tokens were handed back, by reason (expired, evicted, closed, orphaned).',
    unit: '{lease}',
  });
  const tokensLeased = meter.createCounter(`${prefix}tokens.leased`, { unit: '{token}' });
  const tokensReturned = meter.createCounter(`${prefix}tokens.returned`, { unit: '{token}' });
  const tokensStranded = meter.createCounter(`${prefix}tokens.stranded`, {
    description: 'Tokens whose return to the store failed: missing from the shared bucket until it refills.',
    unit: '{token}',
  });
  meter
    .createObservableGauge(`${prefix}breaker.state`, {
      description: 'Limiters whose store circuit breaker is in each state.',
    })
    .addCallback((result) => {
      for (const [state, n] of breakerStates(limiters) ?? []) result.observe(n, { state });
    });
  meter
    .createObservableGauge(`${prefix}local_keys`, {
      description: 'Entries in the local lease table.',
      unit: '{entry}',
    })
    .addCallback((result) => {
      result.observe(localKeys(limiters));
    });
  const topDenied = meter.createObservableGauge(`${prefix}top_denied`, {
    description:
      'Recent denials (decayed count) of the rank-th most denied key of each policy; keys are not exported.',
  });
  const topShare = meter.createObservableGauge(`${prefix}top_denied.share`, {
    description: "The rank-th most denied key's share of its policy's recent denials.",
  });
  meter.addBatchObservableCallback(
    (result) => {
      for (const r of rankDenials(limiters, topN)) {
        const attributes: Attributes = { policy: r.policy, rank: r.rank };
        result.observe(topDenied, r.count, attributes);
        result.observe(topShare, r.share, attributes);
      }
    },
    [topDenied, topShare],
  );

  const observer: Observer = {
    storeCall(e: StoreCallEvent): void {
      const op = { op: e.op };
      storeCalls.add(1, op);
      storeDuration.record(e.seconds, op);
      if (e.errorCode !== undefined) storeErrors.add(1, { op: e.op, code: e.errorCode });
    },
    lease(e: LeaseEvent): void {
      const policy = { policy: e.policy };
      switch (e.kind) {
        case 'granted':
          leasesGranted.add(1, policy);
          tokensLeased.add(e.tokens, policy);
          return;
        case 'returned':
          leasesReturned.add(1, { policy: e.policy, reason: e.reason });
          tokensReturned.add(e.tokens, policy);
          return;
        case 'stranded':
          tokensStranded.add(e.tokens, policy);
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
