/**
 * A fleet what-if (`--instances 5,10,20,50`, `--max-fraction 0.02,0.05,0.1`): the same scenario or
 * log at each instance count and lease size, so a user can pick their lease size from drift and
 * cost as functions of both.
 */
export interface FleetPoint {
  instances: number;
  /** Null: the policy's own lease size. */
  maxFraction: number | null;
  driftPct: number;
  worstDriftPct: number | null;
  callsPerDecision: number;
  roundTripsPerDecision: number;
}

export interface FleetReport {
  scenario: string;
  points: FleetPoint[];
}

export const fractionLabel = (f: number | null) => (f === null ? 'policy' : `maxFraction ${f}`);

/** One line per instance count, one column pair (drift, store calls) per lease size. */
export function fleetTable(f: FleetReport): string {
  const fractions = [...new Set(f.points.map((p) => p.maxFraction))];
  const counts = [...new Set(f.points.map((p) => p.instances))].sort((a, b) => a - b);
  const head = [
    'instances',
    ...fractions.flatMap((x) => [`drift % (${fractionLabel(x)})`, 'calls/dec', 'trips/dec']),
  ];
  const rows = counts.map((n) => [
    String(n),
    ...fractions.flatMap((x) => {
      const p = f.points.find((q) => q.instances === n && q.maxFraction === x);
      return p
        ? [
            `${p.driftPct >= 0 ? '+' : ''}${p.driftPct.toFixed(2)}`,
            p.callsPerDecision.toFixed(3),
            p.roundTripsPerDecision.toFixed(3),
          ]
        : ['', '', ''];
    }),
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padStart(widths[i]!)).join('  ');
  return [`what-if: ${f.scenario}`, line(head), ...rows.map(line)].join('\n');
}
