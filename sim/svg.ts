/**
 * Small inline-SVG charts for the HTML report: no scripts, no external assets, so the file opens
 * anywhere and prints as it looks.
 */

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

const W = 540;
const H = 210;
const M = { top: 26, right: 46, bottom: 36, left: 52 };
const PLOT_W = W - M.left - M.right;
const PLOT_H = H - M.top - M.bottom;

/** About `count` round tick values covering [lo, hi]. */
export function ticks(lo: number, hi: number, count = 5): number[] {
  if (!(hi > lo)) return [lo];
  const raw = (hi - lo) / count;
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * magnitude).find((s) => s >= raw) ?? raw;
  const out: number[] = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step)
    out.push(Number(v.toPrecision(12)));
  return out;
}

function label(v: number): string {
  const a = Math.abs(v);
  if (a >= 1e6) return `${Number((v / 1e6).toPrecision(3))}M`;
  if (a >= 1e4) return `${Number((v / 1e3).toPrecision(3))}k`;
  return String(Number(v.toPrecision(3)));
}

export interface LineSeries {
  label: string;
  color: string;
  values: readonly (number | null)[];
  /** Draw as a step line (instance counts) rather than straight segments. */
  step?: boolean;
  dashed?: boolean;
}

export interface LineChartOptions {
  title: string;
  /** x value of each point (seconds). */
  x: readonly number[];
  xLabel: string;
  series: LineSeries[];
  /** Horizontal guide lines, e.g. the ±2 % drift band. */
  guides?: { value: number; color: string; label?: string }[];
  /** Plotted against the right-hand axis, with its own scale. */
  right?: LineSeries;
  /** Keep y from going below this span around 0, so a flat 0 % line does not fill the chart. */
  minSpan?: number;
}

function frame(title: string, body: string, legend: { label: string; color: string }[]): string {
  let x = M.left;
  const items = legend
    .map((l) => {
      const item = `<rect x="${x}" y="${H - 11}" width="10" height="3" fill="${l.color}"/><text x="${x + 14}" y="${H - 6}" class="lg">${escapeHtml(l.label)}</text>`;
      x += 22 + l.label.length * 6.2;
      return item;
    })
    .join('');
  return `<svg class="chart" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" role="img" aria-label="${escapeHtml(title)}">
<text x="${M.left}" y="15" class="ct">${escapeHtml(title)}</text>${body}${items}</svg>`;
}

function yAxis(lo: number, hi: number, side: 'left' | 'right', y: (v: number) => number): string {
  return ticks(lo, hi, 4)
    .map((v) => {
      const yy = y(v).toFixed(1);
      if (side === 'right')
        return `<text x="${W - M.right + 5}" y="${yy}" class="tk" dy="3">${label(v)}</text>`;
      return `<line x1="${M.left}" x2="${W - M.right}" y1="${yy}" y2="${yy}" class="gr"/><text x="${M.left - 5}" y="${yy}" class="tk" text-anchor="end" dy="3">${label(v)}</text>`;
    })
    .join('');
}

function range(values: Iterable<number | null>, include: number[]): [number, number] {
  let lo = Math.min(...include);
  let hi = Math.max(...include);
  for (const v of values) {
    if (v === null || !Number.isFinite(v)) continue;
    lo = Math.min(lo, v);
    hi = Math.max(hi, v);
  }
  if (hi === lo) hi = lo + 1;
  const pad = (hi - lo) * 0.06;
  return [lo < 0 ? lo - pad : lo, hi + pad];
}

function path(
  x: readonly number[],
  values: readonly (number | null)[],
  sx: (v: number) => number,
  sy: (v: number) => number,
  step: boolean,
): string {
  let d = '';
  let open = false;
  values.forEach((v, i) => {
    if (v === null || !Number.isFinite(v)) {
      open = false;
      return;
    }
    const px = sx(x[i]!).toFixed(1);
    const py = sy(v).toFixed(1);
    if (!open) d += `M${px},${py}`;
    else if (step) d += `H${px}V${py}`;
    else d += `L${px},${py}`;
    open = true;
  });
  return d;
}

export function lineChart(o: LineChartOptions): string {
  const xs = o.x;
  const x0 = Math.min(0, ...xs);
  const x1 = Math.max(x0 + 1, ...xs);
  const sx = (v: number) => M.left + ((v - x0) / (x1 - x0)) * PLOT_W;
  const all = o.series.flatMap((s) => s.values);
  const span = o.minSpan ?? 0;
  const [lo, hi] = range(all, [0, -span, span, ...(o.guides ?? []).map((g) => g.value)]);
  const sy = (v: number) => M.top + PLOT_H - ((v - lo) / (hi - lo)) * PLOT_H;
  let body = yAxis(lo, hi, 'left', sy);
  body += ticks(x0, x1, 6)
    .map(
      (v) =>
        `<text x="${sx(v).toFixed(1)}" y="${H - M.bottom + 13}" class="tk" text-anchor="middle">${label(v)}</text>`,
    )
    .join('');
  body += `<text x="${W - M.right}" y="${H - M.bottom + 13}" class="tk" text-anchor="end" dx="40">${escapeHtml(o.xLabel)}</text>`;
  for (const g of o.guides ?? []) {
    const yy = sy(g.value).toFixed(1);
    body += `<line x1="${M.left}" x2="${W - M.right}" y1="${yy}" y2="${yy}" stroke="${g.color}" stroke-dasharray="4 3"/>`;
    if (g.label)
      body += `<text x="${W - M.right - 2}" y="${yy}" dy="-3" class="tk" text-anchor="end" fill="${g.color}">${escapeHtml(g.label)}</text>`;
  }
  if (lo < 0 && hi > 0)
    body += `<line x1="${M.left}" x2="${W - M.right}" y1="${sy(0).toFixed(1)}" y2="${sy(0).toFixed(1)}" class="zero"/>`;
  const legend = o.series.map((s) => ({ label: s.label, color: s.color }));
  if (o.right) {
    const [rlo, rhi] = range(o.right.values, [0]);
    const ry = (v: number) => M.top + PLOT_H - ((v - rlo) / (rhi - rlo)) * PLOT_H;
    body += yAxis(rlo, rhi, 'right', ry);
    body += `<path d="${path(xs, o.right.values, sx, ry, o.right.step ?? false)}" fill="none" stroke="${o.right.color}" stroke-width="1.4"${o.right.dashed ? ' stroke-dasharray="5 3"' : ''}/>`;
    legend.push({ label: `${o.right.label} (right axis)`, color: o.right.color });
  }
  for (const s of o.series) {
    body += `<path d="${path(xs, s.values, sx, sy, s.step ?? false)}" fill="none" stroke="${s.color}" stroke-width="1.6"${s.dashed ? ' stroke-dasharray="5 3"' : ''}/>`;
  }
  body += `<rect x="${M.left}" y="${M.top}" width="${PLOT_W}" height="${PLOT_H}" class="box"/>`;
  return frame(o.title, body, legend);
}

export interface Bar {
  label: string;
  value: number;
  color: string;
  /** Tooltip. */
  title: string;
}

export function barChart(o: {
  title: string;
  bars: Bar[];
  legend: { label: string; color: string }[];
  xLabel: string;
}): string {
  const [lo, hi] = range(
    o.bars.map((b) => b.value),
    [0],
  );
  const sy = (v: number) => M.top + PLOT_H - ((v - lo) / (hi - lo)) * PLOT_H;
  const slot = PLOT_W / Math.max(1, o.bars.length);
  const width = Math.max(1, slot * 0.8);
  let body = yAxis(lo, hi, 'left', sy);
  const every = Math.ceil(o.bars.length / 24);
  o.bars.forEach((b, i) => {
    const x = M.left + i * slot + (slot - width) / 2;
    const y = sy(Math.max(0, b.value));
    body += `<rect x="${x.toFixed(1)}" y="${y.toFixed(1)}" width="${width.toFixed(1)}" height="${(sy(0) - y).toFixed(1)}" fill="${b.color}"><title>${escapeHtml(b.title)}</title></rect>`;
    if (i % every === 0) {
      body += `<text x="${(x + width / 2).toFixed(1)}" y="${H - M.bottom + 13}" class="tk" text-anchor="middle">${escapeHtml(b.label)}</text>`;
    }
  });
  body += `<text x="${W - M.right}" y="${H - M.bottom + 13}" class="tk" text-anchor="end" dx="40">${escapeHtml(o.xLabel)}</text>`;
  body += `<rect x="${M.left}" y="${M.top}" width="${PLOT_W}" height="${PLOT_H}" class="box"/>`;
  return frame(o.title, body, o.legend);
}

/** The chart styles, once per page. */
export const CHART_CSS = `
svg.chart { background: #fff; font: 10px system-ui, sans-serif; }
svg.chart .ct { font-size: 12px; font-weight: 600; fill: #222; }
svg.chart .tk { fill: #555; }
svg.chart .lg { fill: #333; }
svg.chart .gr { stroke: #eee; }
svg.chart .zero { stroke: #999; }
svg.chart .box { fill: none; stroke: #ccc; }
`;
