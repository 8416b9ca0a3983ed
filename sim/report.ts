import type { RunRecord } from './engine.js';
import type { Scenario } from './scenario.js';
import { signed } from './signed.js';

/** One scenario's numbers: what the table, `--json` and the HTML report show. Plain JSON. */
export interface ScenarioReport {
  scenario: Scenario;
  summary: Summary;
  series: Series;
  instances: InstanceSummary[];
  checks: Check[];
  /** Set on the runs of a fleet what-if: the scenario varied, and this run's point. */
  fleet?: { base: string; instances: number; maxFraction: number | null };
}

export interface Summary {
  /** What the gateways ran: the policy, or the plans file. */
  policy: string;
  /** Virtual time the traffic spanned. */
  durationMs: number;
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
  envelope: PolicyEnvelope | null;
  /** Every policy's envelope (one without a plans file). */
  envelopes: PolicyEnvelope[];
  /** Drift of the heaviest 1 % of the client keys and of the rest. */
  keyClasses: KeyClass[];
  /** The worst cumulative drift over the run, and when (null before the reference admitted enough). */
  worstDrift: { pct: number; atMs: number } | null;
  /** Worst window in which the cluster admitted more than the exact reference, in tokens. */
  overVsExact: number;
  /** Worst window in which the cluster admitted less than the exact reference, in tokens. */
  underVsExact: number;
  deniedBelowLimit: number;
  /** Denials below the limit in % of decisions. */
  deniedBelowLimitPct: number;
  storeCalls: number;
  /** Store calls with one instance's calls of one instant counted once, as a batching store sends them. */
  roundTrips: number;
  callsPerDecision: number;
  roundTripsPerDecision: number;
  /** The exact reference's store calls per decision: what a per-request limiter costs. */
  exactCallsPerDecision: number;
  lease: {
    granted: number;
    tokensLeased: number;
    averageSize: number;
    tokensReturned: number;
    /** Leased tokens neither spent nor handed back: taken by crashed instances. */
    tokensLost: number;
    /**
     * Tokens admitted under write-behind allowances that were never reported: admitted by crashed
     * instances and never counted by the store (over-admission).
     */
    tokensUnreported: number;
    /** Decisions answered without waiting on the store, in %. */
    localPct: number;
    storeErrors: number;
  };
}

/**
 * Over every key of one policy: the worst window above the exact envelope, the bound it is checked
 * against, and `leaseAllowance`: what the instances' leases can hold (2·maxLease each at the peak
 * instance count), which also bounds each key's drift in tokens and its denials below the limit.
 */
export interface PolicyEnvelope {
  policy: string;
  worstExcess: number;
  bound: number;
  leaseAllowance: number;
  formula: string;
  /** Over the keys, the lowest and the highest admitted − exact tokens of one key. */
  keyDiff: { lowest: number; highest: number };
  /** The most denials below the limit any one key had. */
  keyDeniedBelowLimit: number;
}

export interface KeyClass {
  /** "heaviest 10" or "tail 990". */
  name: string;
  keys: number;
  requests: number;
  admittedTokens: number;
  exactTokens: number;
  driftPct: number;
  deniedBelowLimitPct: number;
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
  /** The log's instance name, when the log's instance column picked the instance. */
  name: string | null;
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
  /** A target of open work (the scenario's, or this check's own): missed, it fails the run only with --strict. */
  pending?: string;
}

function pct(part: number, whole: number): number {
  return whole === 0 ? 0 : (100 * part) / whole;
}

/** Drift of `admitted` against `exact`, in %: 0 when both are 0. */
export function drift(admitted: number, exact: number): number {
  if (exact === 0) return admitted === 0 ? 0 : Number.POSITIVE_INFINITY;
  return (100 * (admitted - exact)) / exact;
}

/** Share of the keys, by requests, reported as "the heaviest keys". */
const HEAD_FRACTION = 0.01;

/** Drift of the heaviest 1 % of the client keys (at least one) and of the rest, by requests. */
function keyClasses(run: RunRecord): KeyClass[] {
  const clients = [...run.clients.values()].sort((a, b) => b.requests - a.requests);
  const head = Math.max(1, Math.ceil(clients.length * HEAD_FRACTION));
  const summarizeClass = (name: string, members: typeof clients): KeyClass => {
    let requests = 0;
    let admitted = 0;
    let exact = 0;
    let denied = 0;
    for (const c of members) {
      requests += c.requests;
      admitted += c.clusterTokens;
      exact += c.exactTokens;
      denied += c.deniedBelowLimit;
    }
    return {
      name,
      keys: members.length,
      requests,
      admittedTokens: admitted,
      exactTokens: exact,
      driftPct: drift(admitted, exact),
      deniedBelowLimitPct: pct(denied, requests),
    };
  };
  const classes = [summarizeClass(`heaviest ${head}`, clients.slice(0, head))];
  if (clients.length > head)
    classes.push(summarizeClass(`tail ${clients.length - head}`, clients.slice(head)));
  return classes;
}

/** Per policy: the envelope bounds over its keys. */
function envelopes(run: RunRecord): PolicyEnvelope[] {
  const { scenario } = run;
  const rtt = scenario.latency.meanMs * (1 + scenario.latency.jitter);
  const out: PolicyEnvelope[] = [];
  for (const [policy, model] of run.deployment.models) {
    const e = model.envelope;
    if (!e) continue;
    let worstExcess = Number.NEGATIVE_INFINITY;
    const keyDiff = { lowest: 0, highest: 0 };
    let keyDeniedBelowLimit = 0;
    for (const r of run.checks.values()) {
      if (r.policy !== policy) continue;
      const diff = r.clusterTokens - r.exactTokens;
      keyDiff.lowest = Math.min(keyDiff.lowest, diff);
      keyDiff.highest = Math.max(keyDiff.highest, diff);
      keyDeniedBelowLimit = Math.max(keyDeniedBelowLimit, r.deniedBelowLimit);
      if (r.envelope) worstExcess = Math.max(worstExcess, r.envelope.worst);
    }
    const leaseAllowance = e.allowancePerInstance * run.peakInstances;
    out.push({
      policy,
      // No admission at all: nothing rose above anything.
      worstExcess: Number.isFinite(worstExcess) ? worstExcess : 0,
      bound: leaseAllowance + e.ratePerMs * rtt,
      leaseAllowance,
      formula: e.formula,
      keyDiff,
      keyDeniedBelowLimit,
    });
  }
  return out;
}

/**
 * Share of the exact limiter's final total it must have admitted before the cumulative drift counts
 * towards the worst: the warm-up, during which a few tokens are whole percent.
 */
export const WARM_UP_FRACTION = 0.1;

/** The worst cumulative drift over the run, after the warm-up (`WARM_UP_FRACTION`). */
function worstDrift(driftPct: readonly (number | null)[], exact: readonly number[], bucketMs: number) {
  const total = exact.reduce((a, b) => a + b, 0);
  let seen = 0;
  let worst: { pct: number; atMs: number } | null = null;
  driftPct.forEach((d, i) => {
    seen += exact[i]!;
    if (d === null || seen < total * WARM_UP_FRACTION) return;
    if (worst === null || Math.abs(d) > Math.abs(worst.pct)) worst = { pct: d, atMs: (i + 1) * bucketMs };
  });
  return worst as { pct: number; atMs: number } | null;
}

export function summarize(run: RunRecord): ScenarioReport {
  const { scenario } = run;
  let overVsExact = 0;
  let underVsExact = 0;
  let checkTokens = 0;
  for (const r of run.checks.values()) {
    const gaps = r.gaps.worst;
    overVsExact = Math.max(overVsExact, gaps.over);
    underVsExact = Math.max(underVsExact, gaps.under);
    if (!run.deployment.models.get(r.policy)?.isExact) checkTokens += r.clusterTokens;
  }
  const policyEnvelopes = envelopes(run);
  // The one closest to (or furthest over) its bound stands for all in the table.
  const tightest = policyEnvelopes.reduce<PolicyEnvelope | null>(
    (worst, e) => (worst === null || e.worstExcess - e.bound > worst.worstExcess - worst.bound ? e : worst),
    null,
  );

  const stats = run.instances.map((i) => i.stats);
  const sum = (f: (s: (typeof stats)[number]) => number) => stats.reduce((acc, s) => acc + f(s), 0);
  const granted = sum((s) => s.leasesGranted);
  const tokensLeased = sum((s) => s.tokensLeased);
  const tokensReturned = sum((s) => s.tokensReturned);

  let admitted = 0;
  let exact = 0;
  const driftPct = run.buckets.admitted.map((a, i) => {
    admitted += a;
    exact += run.buckets.exact[i]!;
    return exact === 0 ? null : drift(admitted, exact);
  });

  const summary: Summary = {
    policy: run.deployment.label,
    durationMs: run.durationMs,
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
    worstDrift: worstDrift(driftPct, run.buckets.exact, run.bucketMs),
    admittedPct: pct(run.admittedRequests, run.requests),
    exactAdmittedPct: pct(run.exactRequests, run.requests),
    envelope: tightest,
    envelopes: policyEnvelopes,
    keyClasses: keyClasses(run),
    overVsExact,
    underVsExact,
    deniedBelowLimit: run.deniedBelowLimit,
    deniedBelowLimitPct: pct(run.deniedBelowLimit, run.requests),
    storeCalls: run.storeCalls,
    roundTrips: run.roundTrips,
    callsPerDecision: run.requests === 0 ? 0 : run.storeCalls / run.requests,
    roundTripsPerDecision: run.requests === 0 ? 0 : run.roundTrips / run.requests,
    exactCallsPerDecision: run.requests === 0 ? 0 : run.referenceStoreCalls / run.requests,
    lease: {
      granted,
      tokensLeased,
      averageSize: granted === 0 ? 0 : tokensLeased / granted,
      tokensReturned,
      tokensLost: Math.max(0, tokensLeased - tokensReturned - checkTokens),
      tokensUnreported: sum((s) => s.tokensAllowed - s.tokensReported),
      localPct: pct(
        sum((s) => s.localDecisions),
        sum((s) => s.decisions),
      ),
      storeErrors: sum((s) => s.storeErrors),
    },
  };

  return {
    scenario,
    summary,
    series: { bucketMs: run.bucketMs, ...run.buckets, driftPct },
    instances: run.instances.map(({ stats: s, ...rest }) => ({ ...rest, storeCalls: s.storeCalls })),
    checks: checks(scenario, summary),
  };
}

const fmt = (n: number, digits = 2) => n.toFixed(digits);

/** What the worst drift leaves out, in words. */
export const WARM_UP = `after the warm-up (until the exact limiter has admitted ${WARM_UP_FRACTION * 100} % of its total)`;

/** "≤" when the check holds, ">" when it does not (or "≥" / "<"). */
const le = (ok: boolean) => (ok ? '≤' : '>');
const ge = (ok: boolean) => (ok ? '≥' : '<');

/** "−2.31 % at 14.0 s". */
export function worstText(s: Summary): string {
  return s.worstDrift === null
    ? 'n/a'
    : `${signed(s.worstDrift.pct)} % at ${(s.worstDrift.atMs / 1000).toFixed(1)} s`;
}

function checks(scenario: Scenario, s: Summary): Check[] {
  const out = targetsAndBounds(scenario, s);
  for (const c of out) {
    const pending =
      c.name === 'worst drift' ? (scenario.pending ?? scenario.expect.worstDriftPending) : scenario.pending;
    if (c.kind === 'target' && pending !== undefined) c.pending = pending;
  }
  return out;
}

function targetsAndBounds(scenario: Scenario, s: Summary): Check[] {
  const out: Check[] = [];
  const { expect } = scenario;
  if (expect.maxAbsDriftPct !== undefined) {
    const ok = Math.abs(s.driftPct) <= expect.maxAbsDriftPct;
    const goal = expect.goalAbsDriftPct === undefined ? '' : ` (goal ${expect.goalAbsDriftPct} %)`;
    out.push({
      name: 'drift',
      kind: 'target',
      ok,
      detail: `final |drift| ${fmt(Math.abs(s.driftPct))} % ${le(ok)} ${expect.maxAbsDriftPct} %${goal}`,
    });
  }
  // The same target holds at every moment after the warm-up, not only at the end. Not for exact
  // mode (a 0 % target): its decisions are the reference's, only heard half a round trip later, so
  // the drift over the run measures requests in flight, and the final drift already checks them all.
  if (expect.maxAbsDriftPct !== undefined && expect.maxAbsDriftPct > 0) {
    const worst = s.worstDrift;
    const worstOk = worst === null || Math.abs(worst.pct) <= expect.maxAbsDriftPct;
    out.push({
      name: 'worst drift',
      kind: 'target',
      ok: worstOk,
      detail:
        worst === null
          ? 'worst |drift| over the run: n/a (the exact limiter admitted too little to tell)'
          : `worst drift over the run ${signed(worst.pct)} % (at ${(worst.atMs / 1000).toFixed(1)} s), |${fmt(Math.abs(worst.pct))}| ${le(worstOk)} ${expect.maxAbsDriftPct} %, ${WARM_UP}`,
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
  // The slack absorbs floating-point sums of fractional lease tokens, far below one token.
  const slack = 1e-6;
  const many = s.envelopes.length > 1;
  for (const e of s.envelopes) {
    const of = many ? ` (${e.policy})` : '';
    const ok = e.worstExcess <= e.bound + slack;
    out.push({
      name: `envelope${of}`,
      kind: 'bound',
      ok,
      detail: `worst window ${fmt(e.worstExcess)} tokens above the exact envelope ${le(ok)} ${fmt(e.bound)} (${e.formula})`,
    });
    // With several rules per request, one rule's refusal moves what the others count, so the
    // per-key bounds below hold for one rule only; the envelope holds for each.
    if (many) continue;
    // Whatever a key's leases hold is all the cluster can be ahead of or behind the exact limiter
    // by on that key (behind also by what crashed instances took with them). Every key has its own
    // leases, so the bound holds per key, not for the sum over keys.
    const allowance = e.leaseAllowance;
    const { lowest, highest } = e.keyDiff;
    const low = -(allowance + s.lease.tokensLost);
    const high = allowance + s.lease.tokensUnreported;
    const inRange = lowest >= low - slack && highest <= high + slack;
    out.push({
      name: 'drift bound',
      kind: 'bound',
      ok: inRange,
      detail: `admitted − exact per key from ${fmt(lowest, 1)} to ${signed(highest, 1)} tokens ${inRange ? 'within' : 'outside'} [${fmt(low, 1)}, +${fmt(high, 1)}] (leases held, + tokens lost below, + usage crashed instances never reported above)`,
    });
    const fewDenials = e.keyDeniedBelowLimit <= allowance;
    out.push({
      name: 'denials below limit',
      kind: 'bound',
      ok: fewDenials,
      detail: `at most ${e.keyDeniedBelowLimit} per key ${le(fewDenials)} ${fmt(allowance, 0)} (one per token the leases can hold)`,
    });
  }
  return out;
}

/** Whether a missed check fails the run: bounds always do, targets unless they are pending. */
export function failsRun(check: Check, options: { strict: boolean }): boolean {
  if (check.ok) return false;
  return check.kind === 'bound' || options.strict || check.pending === undefined;
}
