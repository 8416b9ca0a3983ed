import { type FleetReport, fractionLabel } from './fleet.js';
import { failsRun, type ScenarioReport, WARM_UP, worstText } from './report.js';
import { signed } from './signed.js';
import { barChart, CHART_CSS, escapeHtml, lineChart } from './svg.js';
import { COLUMNS, LEGEND, okLabel } from './table.js';

/** Colours told apart also by readers with red-green colour blindness (blue, orange, grey, magenta). */
const COLOR = {
  cluster: '#e8590c',
  exact: '#1c7ed6',
  offered: '#adb5bd',
  instances: '#5f3dc4',
  calls: '#2b8a3e',
  crash: '#c2255c',
  closed: '#adb5bd',
  live: '#1c7ed6',
};
/** One colour per lease size in the what-if plots. */
const PALETTE = ['#1c7ed6', '#e8590c', '#2b8a3e', '#c2255c', '#5f3dc4', '#868e96'];

const SIGN =
  'Drift is (admitted − exact) / exact: negative means the cluster admitted less than the exact limiter, positive more.';

export interface RunInfo {
  store: string;
  seed: number | null;
  command: string;
}

/** A self-contained HTML report: the summary table, then four charts per scenario. */
export function renderHtml(
  reports: readonly ScenarioReport[],
  fleets: readonly FleetReport[],
  info: RunInfo,
): string {
  const failed = reports.filter((r) => r.checks.some((c) => failsRun(c, { strict: false }))).length;
  const pending = reports.filter((r) => okLabel(r) === '✗ pending').length;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>tokenlease simulator report</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body { font: 14px/1.45 system-ui, sans-serif; color: #222; margin: 24px auto; max-width: 1320px; padding: 0 16px; background: #f8f9fa; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 17px; margin: 0 0 2px; }
.meta { color: #555; margin-bottom: 14px; } code { background: #eef; padding: 0 3px; border-radius: 3px; }
table.sum { border-collapse: collapse; width: 100%; background: #fff; font-size: 11.5px; font-variant-numeric: tabular-nums; }
table.sum th, table.sum td { padding: 3px 4px; border-bottom: 1px solid #e5e5e5; white-space: nowrap; }
table.sum th { background: #f1f3f5; text-align: left; } td.r, th.r { text-align: right; }
td.good { color: #2b8a3e; font-weight: 600; } td.bad { color: #c92a2a; font-weight: 700; } td.pending { color: #e67700; font-weight: 600; }
table.classes { border-collapse: collapse; font-size: 12px; margin: 0 0 8px; font-variant-numeric: tabular-nums; }
table.classes th, table.classes td { padding: 2px 8px; border-bottom: 1px solid #eee; text-align: right; } table.classes th:first-child, table.classes td:first-child { text-align: left; }
.legend { white-space: pre-wrap; color: #555; font-size: 12px; margin: 8px 0 22px; }
section { background: #fff; border: 1px solid #dee2e6; border-radius: 6px; padding: 14px 16px; margin: 0 0 18px; }
.desc { color: #444; margin: 0 0 8px; }
.facts { display: flex; flex-wrap: wrap; gap: 6px 18px; font-size: 13px; margin: 0 0 8px; }
.facts b { font-variant-numeric: tabular-nums; }
.checks { font-size: 12px; margin: 0 0 8px; } .checks .ok { color: #2b8a3e; } .checks .no { color: #c92a2a; font-weight: 700; }
.grid { display: grid; grid-template-columns: 1fr 1fr; gap: 8px; }
.grid svg { width: 100%; height: auto; }
${CHART_CSS}
</style></head><body>
<h1>tokenlease simulator report</h1>
<div class="meta">${reports.length} scenario(s) on <b>${escapeHtml(info.store)}</b>${info.seed === null ? '' : `, seed ${info.seed}`} ·
${failed === 0 ? 'every check that fails the run passed' : `<b style="color:#c92a2a">${failed} scenario(s) missed a check</b>`}${pending === 0 ? '' : ` · <b style="color:#e67700">${pending} pending scenario(s) missed a target of open work</b>`} ·
<code>${escapeHtml(info.command)}</code></div>
${summaryTable(reports)}
<div class="legend">${escapeHtml(SIGN)}\n${escapeHtml(LEGEND)}</div>
${fleets.map(fleetSection).join('\n')}
${reports.map(section).join('\n')}
</body></html>
`;
}

function summaryTable(reports: readonly ScenarioReport[]): string {
  const head = COLUMNS.map(
    (c) => `<th${c.align === 'right' ? ' class="r"' : ''}>${escapeHtml(c.title)}</th>`,
  ).join('');
  const rows = reports.map((r) => {
    const cells = COLUMNS.map((c) => {
      const value = c.cell(r);
      const classes = [c.align === 'right' ? 'r' : ''];
      if (c.title === 'ok')
        classes.push(
          value === '✓' ? 'good' : value === okLabel(r) && value.endsWith('pending') ? 'pending' : 'bad',
        );
      const checked = c.title === 'drift %' ? 'drift' : c.title === 'worst %' ? 'worst drift' : undefined;
      const check = checked && r.checks.find((k) => k.name === checked);
      if (check) classes.push(check.ok ? 'good' : 'bad');
      const cls = classes.filter(Boolean).join(' ');
      const content =
        c.title === 'scenario' ? `<a href="#${anchor(r)}">${escapeHtml(value)}</a>` : escapeHtml(value);
      return `<td${cls ? ` class="${cls}"` : ''}>${content}</td>`;
    });
    return `<tr>${cells.join('')}</tr>`;
  });
  return `<table class="sum"><thead><tr>${head}</tr></thead><tbody>${rows.join('')}</tbody></table>`;
}

function anchor(r: ScenarioReport): string {
  return `s-${r.scenario.name.replace(/[^\w-]/g, '_')}`;
}

function section(r: ScenarioReport): string {
  const { summary: s, series, scenario } = r;
  const seconds = series.offered.map((_, i) => ((i + 1) * series.bucketMs) / 1000);
  const perSecond = 1000 / series.bucketMs;
  const rate = (values: readonly number[]) => values.map((v) => v * perSecond);
  const facts: [string, string][] = [
    ['final drift', `${signed(s.driftPct)} % (the drift target holds for it)`],
    ['worst drift over the run', `${worstText(s)} (the drift target holds for it too, ${WARM_UP})`],
    [
      'admitted',
      `${round(s.admittedTokens)} of ${round(s.offeredTokens)} tokens (exact ${round(s.exactTokens)})`,
    ],
    ['requests admitted', `${s.admittedPct.toFixed(2)} % (exact ${s.exactAdmittedPct.toFixed(2)} %)`],
    [
      'worst window',
      s.envelope
        ? `${signed(s.envelope.worstExcess, 2)} tokens over the exact envelope (bound ${s.envelope.bound.toFixed(2)})`
        : 'n/a',
    ],
    ['vs exact in any window', `+${round(s.overVsExact)} / −${round(s.underVsExact)} tokens`],
    ['denied below limit', String(s.deniedBelowLimit)],
    [
      'store calls / decision',
      `${s.callsPerDecision.toFixed(4)} (exact limiter ${s.exactCallsPerDecision.toFixed(3)})`,
    ],
    ['Redis round trips / decision', `${s.roundTripsPerDecision.toFixed(4)} (${s.roundTrips} in all)`],
    ['policy', s.policy],
    [
      'leases',
      `${s.lease.granted} granted, avg ${s.lease.averageSize.toFixed(1)} tokens, ${round(s.lease.tokensReturned)} returned, ${round(s.lease.tokensLost)} lost, ${round(s.lease.tokensUnreported)} admitted and never reported`,
    ],
    ['answered locally', `${s.lease.localPct.toFixed(2)} %`],
  ];
  const driftLimit = scenario.expect.maxAbsDriftPct;
  const charts = [
    lineChart({
      title: 'Cumulative drift vs the exact limiter (%; below 0: admitted less)',
      x: seconds,
      xLabel: 's',
      series: [{ label: 'drift %', color: COLOR.cluster, values: series.driftPct }],
      guides:
        driftLimit === undefined || driftLimit === 0
          ? []
          : [
              { value: driftLimit, color: '#c92a2a', label: `+${driftLimit} %` },
              { value: -driftLimit, color: '#c92a2a', label: `−${driftLimit} %` },
            ],
      minSpan: 0.5,
    }),
    lineChart({
      title: 'Tokens admitted per second: exact limiter vs cluster',
      x: seconds,
      xLabel: 's',
      series: [
        { label: 'offered', color: COLOR.offered, values: rate(series.offered) },
        { label: 'exact', color: COLOR.exact, values: rate(series.exact) },
        { label: 'cluster', color: COLOR.cluster, values: rate(series.admitted), dashed: true },
      ],
    }),
    barChart({
      title: 'Tokens admitted per instance',
      xLabel: 'instance',
      bars: r.instances.map((i) => ({
        label: String(i.id),
        value: i.admittedTokens,
        color: i.leave === 'crash' ? COLOR.crash : i.leave === 'close' ? COLOR.closed : COLOR.live,
        title: `instance ${i.id}: ${round(i.admittedTokens)} tokens, ${i.decisions} decisions, ${i.storeCalls} store calls; joined ${(i.joinedMs / 1000).toFixed(1)} s${i.leftMs === null ? '' : `, ${i.leave === 'crash' ? 'crashed' : 'closed'} at ${(i.leftMs / 1000).toFixed(1)} s`}`,
      })),
      legend: [
        { label: 'to the end', color: COLOR.live },
        { label: 'scaled in (close)', color: COLOR.closed },
        { label: 'crashed', color: COLOR.crash },
      ],
    }),
    lineChart({
      title: 'Store calls per second',
      x: seconds,
      xLabel: 's',
      series: [{ label: 'store calls/s', color: COLOR.calls, values: rate(series.storeCalls) }],
      right: {
        label: 'instances',
        color: COLOR.instances,
        values: series.instances,
        step: true,
        dashed: true,
      },
    }),
  ];
  return `<section id="${anchor(r)}">
<h2>${escapeHtml(scenario.name)}</h2>
<p class="desc">${escapeHtml(scenario.description)}</p>
<div class="facts">${facts.map(([k, v]) => `<span>${escapeHtml(k)}: <b>${escapeHtml(v)}</b></span>`).join('')}</div>
${classTable(r)}
<div class="checks">${r.checks.map((c) => `<span class="${c.ok ? 'ok' : 'no'}">${c.ok ? '✓' : '✗'} ${escapeHtml(c.name)}: ${escapeHtml(c.detail)}</span>`).join('<br>')}</div>
<div class="grid">${charts.join('\n')}</div>
</section>`;
}

/** Drift of the heaviest keys and of the tail. */
function classTable(r: ScenarioReport): string {
  const rows = r.summary.keyClasses.map(
    (c) =>
      `<tr><td>${escapeHtml(c.name)} keys</td><td>${c.requests}</td><td>${round(c.admittedTokens)}</td><td>${round(c.exactTokens)}</td><td>${escapeHtml(signed(c.driftPct))} %</td><td>${c.deniedBelowLimitPct.toFixed(3)} %</td></tr>`,
  );
  return `<table class="classes"><thead><tr><th>key class (by requests)</th><th>requests</th><th>admitted</th><th>exact</th><th>drift</th><th>denied below limit</th></tr></thead><tbody>${rows.join('')}</tbody></table>`;
}

/** Drift and cost as functions of the instance count, one line per lease size. */
function fleetSection(f: FleetReport): string {
  const counts = [...new Set(f.points.map((p) => p.instances))].sort((a, b) => a - b);
  const fractions = [...new Set(f.points.map((p) => p.maxFraction))];
  const line = (value: (p: FleetReport['points'][number]) => number | null) =>
    fractions.map((x, i) => ({
      label: fractionLabel(x),
      color: PALETTE[i % PALETTE.length]!,
      values: counts.map((n) => {
        const p = f.points.find((q) => q.instances === n && q.maxFraction === x);
        return p ? value(p) : null;
      }),
    }));
  const charts = [
    lineChart({
      title: 'Final drift (%) by instance count',
      x: counts,
      xLabel: 'instances',
      series: line((p) => p.driftPct),
      minSpan: 0.5,
    }),
    lineChart({
      title: 'Store calls per decision by instance count',
      x: counts,
      xLabel: 'instances',
      series: line((p) => p.callsPerDecision),
    }),
  ];
  return `<section id="whatif-${escapeHtml(f.scenario.replace(/[^\w-]/g, '_'))}">
<h2>What-if: ${escapeHtml(f.scenario)}</h2>
<p class="desc">The same traffic at each instance count and lease size (maxFraction: the largest lease as a fraction of the limit). Pick the lease size whose drift you can accept at your fleet size; larger leases cost fewer store calls.</p>
<div class="grid">${charts.join('\n')}</div>
</section>`;
}

function round(n: number): number {
  return Math.round(n * 10) / 10;
}
