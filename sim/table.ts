import type { ScenarioReport } from './report.js';
import type { BalancerConfig, Demand, Scenario } from './scenario.js';
import { signed } from './signed.js';

/** Short labels for the table and the HTML report. */
export function demandLabel(s: Scenario): string {
  const d: Demand = s.traffic.demand;
  const x = (n: number) => `${Number(n.toFixed(2))}×`;
  const base =
    d.shape === 'steady'
      ? x(d.load)
      : d.shape === 'step'
        ? `${x(d.from)}→${x(d.to)} step`
        : `${x(d.low)}–${x(d.high)} saw`;
  const retry = s.traffic.retry ? (s.traffic.retry.honourRetryAfter ? ' +retry' : ' +retry!') : '';
  return base + retry;
}

export function balancerLabel(b: BalancerConfig): string {
  switch (b.kind) {
    case 'zipf':
      return `zipf ${b.s}`;
    case 'round-robin':
      return 'rr';
    default:
      return b.kind;
  }
}

export function instancesLabel(s: Scenario): string {
  return [s.instances, ...s.autoscale.map((e) => `${e.instances}${e.leave === 'crash' ? '✝' : ''}`)].join(
    '→',
  );
}

interface Column {
  title: string;
  align: 'left' | 'right';
  cell: (r: ScenarioReport) => string;
}

/** The columns, shared by the terminal table and the HTML summary. */
export const COLUMNS: Column[] = [
  { title: 'scenario', align: 'left', cell: (r) => r.scenario.name },
  {
    title: 'instances',
    align: 'left',
    cell: (r) => (fromLog(r) ? `${r.instances.length} (log)` : instancesLabel(r.scenario)),
  },
  {
    title: 'balancer',
    align: 'left',
    cell: (r) => (fromLog(r) ? 'log' : balancerLabel(r.scenario.balancer)),
  },
  { title: 'demand', align: 'left', cell: (r) => (r.scenario.replayOf ? 'log' : demandLabel(r.scenario)) },
  { title: 'requests', align: 'right', cell: (r) => String(r.summary.requests) },
  { title: 'admitted', align: 'right', cell: (r) => String(round(r.summary.admittedTokens)) },
  { title: 'exact', align: 'right', cell: (r) => String(round(r.summary.exactTokens)) },
  { title: 'drift %', align: 'right', cell: (r) => signed(r.summary.driftPct) },
  {
    title: 'worst %',
    align: 'right',
    cell: (r) => (r.summary.worstDrift ? signed(r.summary.worstDrift.pct) : 'n/a'),
  },
  {
    title: 'excess/bound',
    align: 'right',
    cell: (r) =>
      r.summary.envelope
        ? `${signed(r.summary.envelope.worstExcess, 1)}/${r.summary.envelope.bound.toFixed(0)}`
        : 'n/a',
  },
  { title: 'over', align: 'right', cell: (r) => String(round(r.summary.overVsExact)) },
  { title: 'under', align: 'right', cell: (r) => String(round(r.summary.underVsExact)) },
  { title: 'denied<lim', align: 'right', cell: (r) => String(r.summary.deniedBelowLimit) },
  { title: 'calls/dec', align: 'right', cell: (r) => r.summary.callsPerDecision.toFixed(3) },
  { title: 'trips/dec', align: 'right', cell: (r) => r.summary.roundTripsPerDecision.toFixed(3) },
  { title: 'avg lease', align: 'right', cell: (r) => r.summary.lease.averageSize.toFixed(1) },
  { title: 'local %', align: 'right', cell: (r) => r.summary.lease.localPct.toFixed(1) },
  { title: 'lost', align: 'right', cell: (r) => String(round(r.summary.lease.tokensLost)) },
  { title: 'ok', align: 'left', cell: (r) => okLabel(r) },
];

function round(n: number): number {
  return Math.round(n * 10) / 10;
}

/** The log's instance column picked the instances. */
function fromLog(r: ScenarioReport): boolean {
  return r.instances.some((i) => i.name !== null);
}

/** ✓, ✗, or "✗ pending" when only targets of open work were missed. */
export function okLabel(r: ScenarioReport): string {
  const missed = r.checks.filter((c) => !c.ok);
  if (missed.length === 0) return '✓';
  return missed.every((c) => c.kind === 'target' && c.pending !== undefined) ? '✗ pending' : '✗';
}

export function formatTable(reports: readonly ScenarioReport[]): string {
  const rows = reports.map((r) => COLUMNS.map((c) => c.cell(r)));
  const widths = COLUMNS.map((c, i) => Math.max(c.title.length, ...rows.map((row) => [...row[i]!].length)));
  const line = (cells: string[]) =>
    cells
      .map((cell, i) => {
        const pad = ' '.repeat(widths[i]! - [...cell].length);
        return COLUMNS[i]!.align === 'left' ? cell + pad : pad + cell;
      })
      .join('  ')
      .trimEnd();
  return [line(COLUMNS.map((c) => c.title)), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join(
    '\n',
  );
}

/** One line per failed check, empty when everything passed. */
export function formatFailures(reports: readonly ScenarioReport[]): string {
  return reports
    .flatMap((r) =>
      r.checks
        .filter((c) => !c.ok)
        .map((c) => {
          return `✗ ${r.scenario.name}: ${c.name}: ${c.detail}${c.pending ? ` [target of ${c.pending}]` : ''}`;
        }),
    )
    .join('\n');
}

export const LEGEND = `drift %: (admitted − exact) / exact tokens; below 0 the cluster admitted less than the exact limiter. worst %: the
cumulative drift farthest from 0 over the run, after the warm-up (until the exact limiter admitted 10 % of its total); the
drift target holds for both. excess/bound: worst tokens admitted in any window above the exact
envelope burst + rate·(L + RTT), and the allowance leasing may add (2·maxLease per instance). over / under: worst window
in which the cluster admitted more / fewer tokens than the exact limiter. denied<lim: denials the exact limiter admitted
with ≥ 10 % of the limit left. calls/dec: store calls per decision (heartbeats included); trips/dec: Redis round trips per decision (one
instance's calls of one instant travel in one batch). lost: leased tokens crashed instances took with them.
instances: a→b→c autoscaling (✝ = leaving instances crash). demand: × the limit; +retry honours Retry-After, +retry! ignores it.
ok: ✗ pending = only targets of open work were missed (reported; they fail the run only with --strict).`;
