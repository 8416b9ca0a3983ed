/**
 * Issue 16's tail latency: one call in flight on 10k Zipf keys against real Redis, every
 * decision timed on its own (performance.now() around the awaited call), p50/p99/p99.9 in µs.
 */
import { contestant, type Decider } from './contestants.js';
import type { BenchContext } from './context.js';
import { drive } from './driver.js';
import { type BenchOutput, type Row, si, type TargetCheck } from './report.js';
import { quantileSorted } from './stats.js';
import { type KeySet, keySets, STREAM_LENGTH } from './zipf.js';

const OURS = 'tokenlease-redis';
const TARGET = { p99: 20, p999: 250 };

interface Latencies {
  readonly sorted: Float64Array;
  readonly errors: number;
  readonly elapsedMs: number;
}

async function timeEach(decider: Decider, keys: KeySet, durationMs: number): Promise<Latencies> {
  const out: number[] = [];
  let errors = 0;
  const mask = STREAM_LENGTH - 1;
  const start = performance.now();
  const end = start + durationMs;
  let next = 0;
  for (let now = start; now < end; ) {
    try {
      await decider.decide(keys.stream[next++ & mask] as string);
    } catch {
      errors++;
    }
    const t = performance.now();
    out.push((t - now) * 1000);
    now = t;
  }
  return { sorted: Float64Array.from(out).sort(), errors, elapsedMs: performance.now() - start };
}

export async function runLatencyRedis(ctx: BenchContext): Promise<BenchOutput> {
  const { latency } = ctx.profile;
  const zipf = keySets(ctx.profile.zipfKeys)[1] as KeySet;
  const rows: Row[] = [];
  const targets: TargetCheck[] = [];
  for (const id of latency.contestants) {
    const c = contestant(id);
    ctx.log(`latency-redis: ${c.label}, ${zipf.name}, 1 in flight`);
    const decider = await c.create('hit', { redisUrl: ctx.redis.url, prefix: `${ctx.runId}:latency:${id}:` });
    let l: Latencies;
    try {
      await drive(decider, { stream: zipf.stream, durationMs: latency.warmMs, concurrency: 1 });
      l = await timeEach(decider, zipf, latency.ms);
    } finally {
      await decider.close();
    }
    const [p50, p99, p999] = [0.5, 0.99, 0.999].map((q) => quantileSorted(l.sorted, q)) as [
      number,
      number,
      number,
    ];
    rows.push({
      bench: 'latency-redis',
      case: `1 in flight, ${zipf.name}: p50 / p99 / p99.9`,
      contestant: c.label,
      value: `${p50.toFixed(1)} / ${p99.toFixed(1)} / ${p999.toFixed(0)} µs`,
      spread: '',
      vs: '',
      note: `max ${(l.sorted[l.sorted.length - 1] ?? Number.NaN).toFixed(0)} µs; ${si(l.sorted.length)} decisions (${si((l.sorted.length / l.elapsedMs) * 1000)}/s)${l.errors > 0 ? `; ${l.errors} errors` : ''}`,
    });
    if (id === OURS) {
      targets.push({
        target: `1 in flight, ${zipf.name}: p99 ≤ ${TARGET.p99} µs and p99.9 ≤ ${TARGET.p999} µs (tokenlease, Redis)`,
        measured: `p99 ${p99.toFixed(1)} µs, p99.9 ${p999.toFixed(0)} µs`,
        met: p99 <= TARGET.p99 && p999 <= TARGET.p999,
      });
    }
  }
  return { rows, targets };
}
