import type { RunRecord } from './engine.js';
import { policyModel } from './policies.js';
import type { Scenario } from './scenario.js';
import { signed } from './table.js';
import { worstEnvelopeExcess, worstGaps } from './windows.js';

/** One scenario's numbers: what the table, `--json` and the HTML report show. Plain JSON. */
export interface ScenarioReport {
  scenario: Scenario;
  summary: Summary;
  series: Series;
  instances: InstanceSummary[];
  checks: Check[];
}

export interface Summary {
  peakInstances: number;
  /** Decisions the cluster made (first attempts and retries). */
  requests: number;
  retries: number;
  /** Requests whose decision failed (store errors), counted as neither admitted nor denied. */
  failed: number;
  offeredTokens: number;
  admittedRequests: number;
  admittedTokens: number;
  exactRequests: number;
  exactTokens: number;
  /** (admitted − exact) / exact tokens, in %. */
  driftPct: number;
  /** Share of requests the cluster admitted, in %. */
  admittedPct: number;
  exactAdmittedPct: number;
  /**
   * Worst over-admission in any window against the exact envelope, the bound it is checked
   * against, and `leaseAllowance`: what the instances' leases can hold (2·maxLease each at the
   * peak instance count), which also bounds the drift in tokens and the denials below the limit.
   * Null when the policy has no envelope.
   */
  envelope: {
    worstExcess: number;
    bound: number;
    leaseAllowance: number;
    formula: string;
    /** Over the keys, the lowest and the highest admitted − exact tokens of one key. */
    keyDiff: { lowest: number; highest: number };
    /** The most denials below the limit any one key had. */
    keyDeniedBelowLimit: number;
  } | null;
  /** Worst window in which the cluster admitted more than the exact reference, in tokens. */
  overVsExact: number;
  /** Worst window in which the cluster admitted less than the exact reference, in tokens. */
  underVsExact: number;
  deniedBelowLimit: number;
  /** Denials below the limit in % of decisions. */
  deniedBelowLimitPct: number;
  storeCalls: number;
  callsPerDecision: number;
  /** The exact reference's store calls per decision: what a per-request limiter costs. */
  exactCallsPerDecision: number;
  lease: {
    granted: number;
    tokensLeased: number;
    averageSize: number;
    tokensReturned: number;
    /** Leased tokens neither spent nor handed back: taken by crashed instances. */
    tokensLost: number;
    /** Decisions answered without waiting on the store, in %. */
    localPct: number;
    storeErrors: number;
  };
}

export interface Series {
  bucketMs: number;
  /** Tokens per bucket. */
  offered: number[];
  admitted: number[];
  exact: number[];
  /** Cumulative drift in % at the end of each bucket (null before the reference admitted anything). */
  driftPct: (number | null)[];
  storeCalls: number[];
  instances: number[];
}

export interface InstanceSummary {
  id: number;
  joinedMs: number;
  leftMs: number | null;
  leave: 'close' | 'crash' | null;
  decisions: number;
  admittedTokens: number;
  storeCalls: number;
}

export interface Check {
  name: string;
  /**
   * `target`: an acceptance number of the scenario (drift, store calls, ...). `bound`: what the
   * design guarantees for any scenario (the envelope and what follows from it).
   */
  kind: 'target' | 'bound';
  ok: boolean;
  /** e.g. "|drift| 0.44 % ≤ 2 %". */
  detail: string;
}

function pct(part: number, whole: number): number {
  return whole === 0 ? 0 : (100 * part) / whole;
}

/** Drift of `admitted` against `exact`, in %: 0 when both are 0. */
export function drift(admitted: number, exact: number): number {
  if (exact === 0) return admitted === 0 ? 0 : Number.POSITIVE_INFINITY;
  return (100 * (admitted - exact)) / exact;
}

function total(values: readonly number[]): number {
  let sum = 0;
  for (const v of values) sum += v;
  return sum;
}

export function summarize(run: RunRecord): ScenarioReport {
  const { scenario } = run;
  const model = policyModel(scenario.policy);

  let worstExcess = Number.NEGATIVE_INFINITY;
  let overVsExact = 0;
  let underVsExact = 0;
  const keyDiff = { lowest: 0, highest: 0 };
  let keyDeniedBelowLimit = 0;
  for (const { cluster, exact, deniedBelowLimit } of run.keys.values()) {
    const diff = total(cluster.costs) - total(exact.costs);
    keyDiff.lowest = Math.min(keyDiff.lowest, diff);
    keyDiff.highest = Math.max(keyDiff.highest, diff);
    keyDeniedBelowLimit = Math.max(keyDeniedBelowLimit, deniedBelowLimit);
    if (model.envelope) {
      const e = model.envelope;
      worstExcess = Math.max(worstExcess, worstEnvelopeExcess(cluster, e.capacity, e.ratePerMs));
    }
    const gaps = worstGaps(cluster, exact);
    overVsExact = Math.max(overVsExact, gaps.over);
    underVsExact = Math.max(underVsExact, gaps.under);
  }

  const stats = run.instances.map((i) => i.stats);
  const sum = (f: (s: (typeof stats)[number]) => number) => stats.reduce((acc, s) => acc + f(s), 0);
  const granted = sum((s) => s.leasesGranted);
  const tokensLeased = sum((s) => s.tokensLeased);
  const tokensReturned = sum((s) => s.tokensReturned);

  const summary: Summary = {
    peakInstances: run.peakInstances,
    requests: run.requests,
    retries: run.retries,
    failed: run.failed,
    offeredTokens: run.offeredTokens,
    admittedRequests: run.admittedRequests,
    admittedTokens: run.admittedTokens,
    exactRequests: run.exactRequests,
    exactTokens: run.exactTokens,
    driftPct: drift(run.admittedTokens, run.exactTokens),
    admittedPct: pct(run.admittedRequests, run.requests),
    exactAdmittedPct: pct(run.exactRequests, run.requests),
    envelope: model.envelope
      ? {
          // No admission at all: nothing rose above anything.
          worstExcess: Number.isFinite(worstExcess) ? worstExcess : 0,
          bound:
            model.envelope.allowancePerInstance * run.peakInstances +
            model.envelope.ratePerMs * scenario.latency.meanMs * (1 + scenario.latency.jitter),
          leaseAllowance: model.envelope.allowancePerInstance * run.peakInstances,
          formula: model.envelope.formula,
          keyDiff,
          keyDeniedBelowLimit,
        }
      : null,
    overVsExact,
    underVsExact,
    deniedBelowLimit: run.deniedBelowLimit,
    deniedBelowLimitPct: pct(run.deniedBelowLimit, run.requests),
    storeCalls: run.storeCalls,
    callsPerDecision: run.requests === 0 ? 0 : run.storeCalls / run.requests,
    exactCallsPerDecision: run.requests === 0 ? 0 : run.referenceStoreCalls / run.requests,
    lease: {
      granted,
      tokensLeased,
      averageSize: granted === 0 ? 0 : tokensLeased / granted,
      tokensReturned,
      tokensLost: model.isExact ? 0 : Math.max(0, tokensLeased - tokensReturned - run.admittedTokens),
      localPct: pct(
        sum((s) => s.localDecisions),
        sum((s) => s.decisions),
      ),
      storeErrors: sum((s) => s.storeErrors),
    },
  };

  let admitted = 0;
  let exact = 0;
  const driftPct = run.buckets.admitted.map((a, i) => {
    admitted += a;
    exact += run.buckets.exact[i]!;
    return exact === 0 ? null : drift(admitted, exact);
  });

  return {
    scenario,
    summary,
    series: { bucketMs: run.bucketMs, ...run.buckets, driftPct },
    instances: run.instances.map(({ stats: s, ...rest }) => ({ ...rest, storeCalls: s.storeCalls })),
    checks: checks(scenario, summary),
  };
}

const fmt = (n: number, digits = 2) => n.toFixed(digits);

/** "≤" when the check holds, ">" when it does not (or "≥" / "<"). */
const le = (ok: boolean) => (ok ? '≤' : '>');
const ge = (ok: boolean) => (ok ? '≥' : '<');

function checks(scenario: Scenario, s: Summary): Check[] {
  const out: Check[] = [];
  const { expect } = scenario;
  if (expect.maxAbsDriftPct !== undefined) {
    const ok = Math.abs(s.driftPct) <= expect.maxAbsDriftPct;
    const goal = expect.goalAbsDriftPct === undefined ? '' : ` (goal ${expect.goalAbsDriftPct} %)`;
    out.push({
      name: 'drift',
      kind: 'target',
      ok,
      detail: `|drift| ${fmt(Math.abs(s.driftPct))} % ${le(ok)} ${expect.maxAbsDriftPct} %${goal}`,
    });
  }
  if (expect.maxDeniedBelowLimitPct !== undefined) {
    const ok = s.deniedBelowLimitPct <= expect.maxDeniedBelowLimitPct;
    out.push({
      name: 'denied below limit %',
      kind: 'target',
      ok,
      detail: `${fmt(s.deniedBelowLimitPct, 3)} % of decisions denied with ≥ 10 % of the limit left ${le(ok)} ${expect.maxDeniedBelowLimitPct} %`,
    });
  }
  if (expect.maxCallsPerDecision !== undefined) {
    const ok = s.callsPerDecision <= expect.maxCallsPerDecision;
    out.push({
      name: 'store calls',
      kind: 'target',
      ok,
      detail: `${fmt(s.callsPerDecision, 3)} calls/decision ${le(ok)} ${expect.maxCallsPerDecision}`,
    });
  }
  if (expect.minAdmittedPct !== undefined) {
    const ok = s.admittedPct >= expect.minAdmittedPct;
    out.push({
      name: 'admitted',
      kind: 'target',
      ok,
      detail: `${fmt(s.admittedPct)} % admitted ${ge(ok)} ${expect.minAdmittedPct} %`,
    });
  }
  if (s.envelope) {
    // The slack absorbs floating-point sums of fractional lease tokens, far below one token.
    const slack = 1e-6;
    const ok = s.envelope.worstExcess <= s.envelope.bound + slack;
    out.push({
      name: 'envelope',
      kind: 'bound',
      ok,
      detail: `worst window ${fmt(s.envelope.worstExcess)} tokens above the exact envelope ${le(ok)} ${fmt(s.envelope.bound)} (${s.envelope.formula})`,
    });
    // Whatever a key's leases hold is all the cluster can be ahead of or behind the exact limiter
    // by on that key (behind also by what crashed instances took with them). Every key has its own
    // leases, so the bound holds per key, not for the sum over keys.
    const allowance = s.envelope.leaseAllowance;
    const { lowest, highest } = s.envelope.keyDiff;
    const low = -(allowance + s.lease.tokensLost);
    const inRange = lowest >= low - slack && highest <= allowance + slack;
    out.push({
      name: 'drift bound',
      kind: 'bound',
      ok: inRange,
      detail: `admitted − exact per key from ${fmt(lowest, 1)} to ${signed(highest, 1)} tokens ${inRange ? 'within' : 'outside'} [${fmt(low, 1)}, +${fmt(allowance, 1)}] (leases held + tokens lost)`,
    });
    const fewDenials = s.envelope.keyDeniedBelowLimit <= allowance;
    out.push({
      name: 'denials below limit',
      kind: 'bound',
      ok: fewDenials,
      detail: `at most ${s.envelope.keyDeniedBelowLimit} per key ${le(fewDenials)} ${fmt(allowance, 0)} (one per token the leases can hold)`,
    });
  }
  return out;
}

/** Whether a missed check fails the run: bounds always do, targets unless the scenario is pending. */
export function failsRun(report: ScenarioReport, check: Check, options: { strict: boolean }): boolean {
  if (check.ok) return false;
  return check.kind === 'bound' || options.strict || report.scenario.pending === undefined;
}
