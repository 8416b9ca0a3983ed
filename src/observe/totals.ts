import type { BreakerState, DecisionCounts, DenyReason, ObservedLimiter, Outcome, Source } from './events.js';

/**
 * What the metrics adapters (Prometheus, OpenTelemetry) share: per-decision counts kept in plain
 * numbers by the limiter itself — a metrics library's `inc`/`add` hashes the label set on every
 * call, which would cost more than the decision being counted — read out when metrics are
 * collected, and the ranked top offenders, which carry no client keys.
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
const ALLOWED_LEASE = OUTCOME_INDEX.allowed * SOURCES.length + SOURCE_INDEX.lease;
const ALLOWED_STORE = OUTCOME_INDEX.allowed * SOURCES.length + SOURCE_INDEX.store;

/** One policy's counts, cumulative: decisions by (outcome, source), denials by reason. */
export class PolicyCounts {
  readonly decisions = new Float64Array(OUTCOMES.length * SOURCES.length);
  readonly denials = new Float64Array(REASONS.length);

  count(outcome: Outcome, source: Source, reason: DenyReason | undefined): void {
    this.decisions[OUTCOME_INDEX[outcome] * SOURCES.length + SOURCE_INDEX[source]]!++;
    if (outcome === 'denied' && reason !== undefined) this.denials[REASON_INDEX[reason]]!++;
  }

  /** `count('allowed', local ? 'lease' : 'store', undefined)`, without its lookups. */
  allowed(local: boolean): void {
    this.decisions[local ? ALLOWED_LEASE : ALLOWED_STORE]!++;
  }
}

/**
 * Decisions by (outcome, source) and denials by reason, per policy, in plain numbers. A limiter
 * counts every decision into its own (`ObservedLimiter.decisions`), with or without observers; the
 * metrics adapters read them when metrics are collected, so metrics add nothing to a decision.
 */
export class DecisionTotals implements DecisionCounts {
  readonly #policies = new Map<string, PolicyCounts>();

  /** The counts of `policy`, from its first decision on. */
  of(policy: string): PolicyCounts {
    let counts = this.#policies.get(policy);
    if (counts === undefined) {
      counts = new PolicyCounts();
      this.#policies.set(policy, counts);
    }
    return counts;
  }

  /** Adds what `other` counted. */
  addAll(other: DecisionCounts): void {
    for (const [{ policy, outcome, source }, n] of other.decisionCounts()) {
      this.of(policy).decisions[OUTCOME_INDEX[outcome] * SOURCES.length + SOURCE_INDEX[source]]! += n;
    }
    for (const [{ policy, reason }, n] of other.denialCounts()) {
      this.of(policy).denials[REASON_INDEX[reason]]! += n;
    }
  }

  /** Decisions by outcome, over every policy. */
  outcomes(): Record<Outcome, number> {
    const out = Object.fromEntries(OUTCOMES.map((o) => [o, 0])) as Record<Outcome, number>;
    for (const counts of this.#policies.values()) {
      for (let cell = 0; cell < counts.decisions.length; cell++) {
        out[OUTCOMES[Math.floor(cell / SOURCES.length)]!] += counts.decisions[cell]!;
      }
    }
    return out;
  }

  *decisionCounts(): Generator<[{ policy: string; outcome: Outcome; source: Source }, number]> {
    for (const [policy, counts] of this.#policies) {
      for (let cell = 0; cell < counts.decisions.length; cell++) {
        const n = counts.decisions[cell]!;
        if (n === 0) continue;
        const outcome = OUTCOMES[Math.floor(cell / SOURCES.length)]!;
        yield [{ policy, outcome, source: SOURCES[cell % SOURCES.length]! }, n];
      }
    }
  }

  *denialCounts(): Generator<[{ policy: string; reason: DenyReason }, number]> {
    for (const [policy, counts] of this.#policies) {
      for (let cell = 0; cell < counts.denials.length; cell++) {
        if (counts.denials[cell]! > 0) yield [{ policy, reason: REASONS[cell]! }, counts.denials[cell]!];
      }
    }
  }
}

/**
 * What a metrics adapter exports as decision counts: those of the limiters it is attached to and of
 * those it was (`retired`, added at their detach), so the counters never go down.
 */
export function summedDecisions(
  limiters: Iterable<ObservedLimiter>,
  retired: DecisionTotals,
): DecisionTotals {
  const sum = new DecisionTotals();
  sum.addAll(retired);
  for (const l of limiters) if (l.decisions !== undefined) sum.addAll(l.decisions);
  return sum;
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
