import type { Summary } from './stats.js';

/** One line of the suite's table. Every bench reports into the same columns. */
export interface Row {
  readonly bench: string;
  readonly case: string;
  readonly contestant: string;
  /** The measured median, with its unit. */
  readonly value: string;
  /** Spread over rounds (± standard error), or '' for a single measurement. */
  readonly spread: string;
  /** Comparison with the reference of the same case (the Map floor, no limiter, ...). */
  readonly vs: string;
  readonly note: string;
}

/** A goal from the issue, checked against this run's numbers. */
export interface TargetCheck {
  readonly target: string;
  readonly measured: string;
  /** undefined when this run did not measure it (e.g. a --quick run without that case). */
  readonly met: boolean | undefined;
}

export interface BenchOutput {
  readonly rows: readonly Row[];
  readonly targets: readonly TargetCheck[];
}

export function si(n: number, digits = 3): string {
  if (!Number.isFinite(n)) return String(n);
  const abs = Math.abs(n);
  if (abs >= 1e6) return `${(n / 1e6).toPrecision(digits)} M`;
  if (abs >= 1e3) return `${(n / 1e3).toPrecision(digits)} k`;
  return n.toPrecision(digits);
}

export function percentSpread(s: Summary): string {
  if (s.rounds < 2 || s.median === 0) return '';
  return `±${((100 * s.se) / Math.abs(s.median)).toFixed(1)}%`;
}

export function ms(n: number, digits = 3): string {
  return `${n.toFixed(digits)} ms`;
}

export function signedMs(n: number, digits = 3): string {
  return `${n >= 0 ? '+' : '−'}${Math.abs(n).toFixed(digits)} ms`;
}

const HEADER = ['bench', 'case', 'contestant', 'median', '±SE', 'vs reference', 'note'] as const;

function cells(row: Row): string[] {
  return [row.bench, row.case, row.contestant, row.value, row.spread, row.vs, row.note];
}

/** A Markdown table, padded so it also reads well in a terminal. */
export function markdownTable(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (r: readonly string[]) =>
    `| ${r.map((c, i) => (c ?? '').padEnd(widths[i] ?? 0)).join(' | ')} |`;
  return [line(header), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...rows.map(line)].join('\n');
}

export function resultsTable(rows: readonly Row[]): string {
  return markdownTable(HEADER, rows.map(cells));
}

export function targetsTable(targets: readonly TargetCheck[]): string {
  const verdict = (t: TargetCheck) => (t.met === undefined ? 'not measured' : t.met ? 'met' : 'MISSED');
  return markdownTable(
    ['target', 'measured', 'verdict'],
    targets.map((t) => [t.target, t.measured, verdict(t)]),
  );
}
