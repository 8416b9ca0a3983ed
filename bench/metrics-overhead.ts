/**
 * Decisions per CPU-second on the lease-hit hot path with Prometheus metrics on vs off, in one run.
 *
 * Each round times the same sequential `await consume()` loop on two limiters (one with
 * `prometheusObserver`, one without), alternating which goes first; the report is the median of the
 * rounds and their ratio. A benchmark, not a test: nothing here asserts a timing.
 *
 * Measures the built package (dist/): `npm run bench -- --case metrics`, or after `npm run build`
 *   npx tsx bench/metrics-overhead.ts [--rounds 15] [--decisions 100000] [--keys 100]
 */
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { Registry } from 'prom-client';
import type * as Prometheus from '../src/observe/prometheus.js';
import { entryPoint, Limiter } from './tokenlease.js';

const { prometheusObserver } = await entryPoint<typeof Prometheus>('prometheus');

export interface MetricsOverheadOptions {
  /** @default 15 */
  rounds?: number;
  /** Decisions timed per limiter per round. @default 100_000 */
  decisions?: number;
  /** Keys cycled through (each keeps its own lease). @default 100 */
  keys?: number;
}

/** Median decisions per CPU-second with metrics on and off. */
export async function runMetricsOverhead(
  opts: MetricsOverheadOptions = {},
): Promise<{ on: number; off: number }> {
  const { rounds = 15, decisions = 100_000, keys = 100 } = opts;
  const names = Array.from({ length: keys }, (_, i) => `client-${i}`);
  // A limit far above what one process can spend, so every decision after warm-up is a lease hit.
  const policies = { p: { algorithm: 'token-bucket' as const, rate: 1e9, burst: 1e9 } };
  const make = (metrics: boolean) =>
    new Limiter({
      policies,
      observers: metrics ? [prometheusObserver({ registry: new Registry() })] : [],
    });
  // CPU time, not wall time: on a shared machine other processes stretch wall time at random, while
  // this loop (no I/O after warm-up) costs the same CPU either way.
  const run = async (limiter: Limiter, n: number): Promise<number> => {
    const start = process.cpuUsage();
    for (let i = 0; i < n; i++) await limiter.consume('p', names[i % keys]!);
    const used = process.cpuUsage(start);
    return n / ((used.user + used.system) / 1e6);
  };
  const withMetrics = make(true);
  const without = make(false);
  // Warm-up: grows each key's lease past slow start and lets the JIT settle.
  await run(withMetrics, decisions);
  await run(without, decisions);
  const on: number[] = [];
  const off: number[] = [];
  // Short blocks, alternating which goes first, so drift in machine load hits both sides alike.
  for (let round = 0; round < rounds; round++) {
    if (round % 2 === 0) {
      on.push(await run(withMetrics, decisions));
      off.push(await run(without, decisions));
    } else {
      off.push(await run(without, decisions));
      on.push(await run(withMetrics, decisions));
    }
  }
  await Promise.all([withMetrics.close(), without.close()]);
  return { on: median(on), off: median(off) };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const { values } = parseArgs({
    options: {
      rounds: { type: 'string', default: '15' },
      decisions: { type: 'string', default: '100000' },
      keys: { type: 'string', default: '100' },
    },
  });
  const opts = {
    rounds: Number(values.rounds),
    decisions: Number(values.decisions),
    keys: Number(values.keys),
  };
  const { on, off } = await runMetricsOverhead(opts);
  const fmt = (n: number) => `${(n / 1e6).toFixed(2)} M/s`;
  console.log(`lease-hit decisions per CPU-second, median of ${opts.rounds} rounds × ${opts.decisions}:`);
  console.log(`  metrics off  ${fmt(off)}`);
  console.log(`  metrics on   ${fmt(on)}`);
  console.log(
    `  on / off     ${(on / off).toFixed(3)}  (+${(1e9 / on - 1e9 / off).toFixed(0)} ns per decision)`,
  );
}
