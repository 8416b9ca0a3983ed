import type {
  BreakerState,
  DecisionEvent,
  DenyReason,
  ObservedLimiter,
  Observer,
  Outcome,
  Source,
} from './events.js';

/**
 * What the metrics adapters (Prometheus, OpenTelemetry) share: per-decision counts kept in plain
 * numbers — a metrics library's `inc`/`add` hashes the label set on every call, which would cost more
 * than the decision being counted — read out when metrics are collected, and the ranked top
 * offenders, which carry no client keys.
 */

export const OUTCOMES: readonly Outcome[] = [
  'allowed',
  'denied',
  'shadow-denied',
  'failed-open',
  'failed-closed',
];
export const SOURCES: readonly Source[] = ['lease', 'store', 'fallback'];
export const REASONS: readonly DenyReason[] = ['limit', 'cost-above-limit'];
export const BREAKER_STATES: readonly BreakerState[] = ['closed', 'open', 'half-open'];
const OUTCOME_INDEX = Object.fromEntries(OUTCOMES.map((o, i) => [o, i])) as Record<Outcome, number>;
const SOURCE_INDEX = Object.fromEntries(SOURCES.map((s, i) => [s, i])) as Record<Source, number>;
const REASON_INDEX = Object.fromEntries(REASONS.map((r, i) => [r, i])) as Record<DenyReason, number>;

/** Cumulative counts per policy, one cell per combination of the other labels. */
export class PolicyTotals {
  readonly #cells = new Map<string, Float64Array>();
  readonly #size: number;
  /** The policy counted last and its cells: a run of one policy's decisions skips the map. */
  #lastPolicy: string | undefined;
  #lastCells: Float64Array | undefined;

  constructor(size: number) {
    this.#size = size;
  }

  add(policy: string, cell: number): void {
    let cells = policy === this.#lastPolicy ? this.#lastCells : this.#cells.get(policy);
    if (cells === undefined) {
      cells = new Float64Array(this.#size);
      this.#cells.set(policy, cells);
    }
    this.#lastPolicy = policy;
    this.#lastCells = cells;
    cells[cell]!++;
  }

  /** Every non-zero count as [policy, cell, total]. */
  *entries(): Generator<[string, number, number]> {
    for (const [policy, cells] of this.#cells) {
      for (let i = 0; i < cells.length; i++) if (cells[i]! > 0) yield [policy, i, cells[i]!];
    }
  }
}

/** Decisions by (outcome, source) and denials by reason, per policy. */
export class DecisionTotals {
  readonly decisions = new PolicyTotals(OUTCOMES.length * SOURCES.length);
  readonly denials = new PolicyTotals(REASONS.length);

  add(e: DecisionEvent): void {
    this.count(e.policy, e.outcome, e.source, e.reason);
  }

  /** `add` of an event's labels, for a caller that has no event object. */
  count(policy: string, outcome: Outcome, source: Source, reason: DenyReason | undefined): void {
    this.decisions.add(policy, OUTCOME_INDEX[outcome] * SOURCES.length + SOURCE_INDEX[source]);
    if (outcome === 'denied' && reason !== undefined) this.denials.add(policy, REASON_INDEX[reason]);
  }

  *decisionCounts(): Generator<[{ policy: string; outcome: Outcome; source: Source }, number]> {
    for (const [policy, cell, n] of this.decisions.entries()) {
      const outcome = OUTCOMES[Math.floor(cell / SOURCES.length)]!;
      yield [{ policy, outcome, source: SOURCES[cell % SOURCES.length]! }, n];
    }
  }

  *denialCounts(): Generator<[{ policy: string; reason: DenyReason }, number]> {
    for (const [policy, cell, n] of this.denials.entries()) yield [{ policy, reason: REASONS[cell]! }, n];
  }
}

/**
 * Where an observer whose `decision` only counts into a `DecisionTotals` (the metrics adapters)
 * says so: the limiter then counts each decision straight into the totals, building no event
 * object (on a lease hit the event cost more than the count).
 */
export const COUNTS_DECISIONS = Symbol('tokenlease.countsDecisions');

interface Counting {
  readonly totals: DecisionTotals;
  /** The observer's `decision` as made here: a replaced one gets events as any observer does. */
  readonly decision: (e: DecisionEvent) => void;
}

/** Marks `observer`, whose `decision` does nothing but add to `totals`, so the limiter counts directly. */
export function countsDecisions<O extends Observer>(observer: O, totals: DecisionTotals): O {
  const counting: Counting = { totals, decision: observer.decision! };
  return Object.assign(observer, { [COUNTS_DECISIONS]: counting });
}

/** The totals `observer` counts decisions into, when its `decision` is still the counting one. */
export function decisionTotalsOf(observer: Observer): DecisionTotals | undefined {
  const counting = (observer as { [COUNTS_DECISIONS]?: Counting })[COUNTS_DECISIONS];
  return counting !== undefined && counting.decision === observer.decision ? counting.totals : undefined;
}

export interface RankedDenials {
  policy: string;
  /** 1 for the most denied key. */
  rank: number;
  /** Recent (decayed) denials of that key; 0 when fewer keys were denied. */
  count: number;
  /** Its share of the policy's recent denials. */
  share: number;
}

/**
 * Ranks 1..topN (summed per key across limiters) of every policy with recent denials; all ranks of
 * such a policy, so the label set stays within policies × ranks and a rank's series does not flicker.
 */
export function rankDenials(limiters: Iterable<ObservedLimiter>, topN: number): RankedDenials[] {
  const byPolicy = new Map<string, { merged: Map<string, number>; total: number }>();
  for (const l of limiters) {
    for (const policy of l.policies) {
      let acc = byPolicy.get(policy);
      if (!acc) {
        acc = { merged: new Map(), total: 0 };
        byPolicy.set(policy, acc);
      }
      const recent = l.offenders(policy, topN);
      acc.total += recent.total;
      for (const h of recent.top) acc.merged.set(h.key, (acc.merged.get(h.key) ?? 0) + h.count);
    }
  }
  const out: RankedDenials[] = [];
  for (const [policy, { merged, total }] of byPolicy) {
    if (merged.size === 0) continue;
    const ranked = [...merged.values()].sort((a, b) => b - a);
    for (let rank = 1; rank <= topN; rank++) {
      const count = ranked[rank - 1] ?? 0;
      out.push({ policy, rank, count, share: total > 0 ? Math.min(1, count / total) : 0 });
    }
  }
  return out;
}

/** Local table entries summed over the limiters. */
export function localKeys(limiters: Iterable<ObservedLimiter>): number {
  let keys = 0;
  for (const l of limiters) keys += l.stats().keys;
  return keys;
}

/**
 * How many of the limiters have their store breaker in each state; undefined when none reports a
 * breaker (then no series is exported rather than a made-up "closed").
 */
export function breakerStates(limiters: Iterable<ObservedLimiter>): Map<BreakerState, number> | undefined {
  let counts: Map<BreakerState, number> | undefined;
  for (const l of limiters) {
    const state = l.stats().breaker;
    if (state === undefined) continue;
    counts ??= new Map(BREAKER_STATES.map((s) => [s, 0]));
    counts.set(state, (counts.get(state) ?? 0) + 1);
  }
  return counts;
}
