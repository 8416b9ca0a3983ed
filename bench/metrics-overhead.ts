/**
 * Decisions per CPU-second on the lease-hit hot path with Prometheus metrics on vs off, in one run.
 *
 * On a shared machine two limiters that differ in nothing measured up to ±10 % apart in one process
 * (which one was faster changed from process to process), and a pair timed in alternating blocks of
 * 100k decisions could not resolve 5 %. So each side is several limiters (`instances` with metrics,
 * twice as many without), created interleaved; each round times every limiter `turns` times for a
 * few hundred decisions, in a shuffled order, so machine load and the JIT's moods hit every side
 * alike; a side's figure is its decisions over its CPU time summed over the rounds. The limiters
 * without metrics are two halves, A and B: B against A (the control) shows what the method cannot
 * tell apart, and metrics on are compared with both together. A benchmark, not a test: nothing here
 * asserts a timing.
 *
 * Measures the built package (dist/): `npm run bench -- --case metrics`, or after `npm run build`
 *   npx tsx bench/metrics-overhead.ts [--rounds 11] [--decisions 100000] [--keys 100] [--instances 8]
 */
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { Registry } from 'prom-client';
import type * as Prometheus from '../src/observe/prometheus.js';
import { entryPoint, Limiter } from './tokenlease.js';

const { prometheusObserver } = await entryPoint<typeof Prometheus>('prometheus');

export interface MetricsOverheadOptions {
  /** @default 11 */
  rounds?: number;
  /** Decisions timed per side per round, shared among its limiters and turns. @default 100_000 */
  decisions?: number;
  /** Keys cycled through (each keeps its own lease). @default 100 */
  keys?: number;
  /** Limiters per side. @default 8 */
  instances?: number;
  /** Times each limiter is timed per round. @default 12 */
  turns?: number;
}

export interface MetricsOverhead {
  /** Decisions per CPU-second with metrics, over all rounds. */
  on: number;
  /** Decisions per CPU-second without metrics: both halves together, and each. */
  off: number;
  offA: number;
  offB: number;
  /** The median over rounds of each round's on/off ratio. */
  roundMedian: number;
  /** The median over rounds of each round's B/A ratio: the control's. */
  controlMedian: number;
}

const SIDES = ['on', 'offA', 'offB'] as const;
type Side = (typeof SIDES)[number];

/** Decisions per CPU-second with metrics on and off, and off against off (the control). */
export async function runMetricsOverhead(opts: MetricsOverheadOptions = {}): Promise<MetricsOverhead> {
  const { rounds = 11, decisions = 100_000, keys = 100, instances = 8, turns = 12 } = opts;
  const turn = Math.max(1, Math.round(decisions / instances / turns));
  const names = Array.from({ length: keys }, (_, i) => `client-${i}`);
  // A limit far above what one process can spend, so every decision after warm-up is a lease hit.
  const policies = { p: { algorithm: 'token-bucket' as const, rate: 1e9, burst: 1e9 } };
  const make = (metrics: boolean) =>
    new Limiter({
      policies,
      observers: metrics ? [prometheusObserver({ registry: new Registry() })] : [],
    });
  // CPU time in µs, not wall time: on a shared machine other processes stretch wall time at random,
  // while this loop (no I/O after warm-up) costs the same CPU either way.
  const run = async (limiter: Limiter, n: number): Promise<number> => {
    const start = process.cpuUsage();
    for (let i = 0; i < n; i++) await limiter.consume('p', names[i % keys]!);
    const used = process.cpuUsage(start);
    return used.user + used.system;
  };
  // Created interleaved, each side first in turn, so no side's limiters sit together in the heap.
  const limiters: { side: Side; limiter: Limiter }[] = [];
  for (let i = 0; i < instances * SIDES.length; i++) {
    const side = SIDES[(i + Math.floor(i / SIDES.length)) % SIDES.length]!;
    limiters.push({ side, limiter: make(side === 'on') });
  }
  // Warm-up: grows each key's lease past slow start and lets the JIT settle.
  for (const { limiter } of limiters) await run(limiter, Math.max(turn, 10 * keys));
  const total = { on: 0, offA: 0, offB: 0 };
  const ratios: number[] = [];
  const controls: number[] = [];
  const order = [...limiters];
  // A fixed seed (Park-Miller), so every run shuffles alike.
  let seed = 1;
  const random = () => {
    seed = (seed * 16807) % 2147483647;
    return seed / 2147483647;
  };
  for (let round = 0; round < rounds; round++) {
    const cpu = { on: 0, offA: 0, offB: 0 };
    for (let t = 0; t < turns; t++) {
      shuffle(order, random);
      for (const { side, limiter } of order) cpu[side] += await run(limiter, turn);
    }
    for (const side of SIDES) total[side] += cpu[side];
    ratios.push((cpu.offA + cpu.offB) / (2 * cpu.on));
    controls.push(cpu.offA / cpu.offB);
  }
  await Promise.all(limiters.map(({ limiter }) => limiter.close()));
  const side = rounds * instances * turns * turn;
  const perCpuSecond = (us: number, decided = side) => decided / (us / 1e6);
  return {
    on: perCpuSecond(total.on),
    off: perCpuSecond(total.offA + total.offB, 2 * side),
    offA: perCpuSecond(total.offA),
    offB: perCpuSecond(total.offB),
    roundMedian: median(ratios),
    controlMedian: median(controls),
  };
}

function shuffle<T>(xs: T[], random: () => number): void {
  for (let i = xs.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [xs[i], xs[j]] = [xs[j]!, xs[i]!];
  }
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const { values } = parseArgs({
    options: {
      rounds: { type: 'string', default: '11' },
      decisions: { type: 'string', default: '100000' },
      keys: { type: 'string', default: '100' },
      instances: { type: 'string', default: '8' },
      turns: { type: 'string', default: '12' },
    },
  });
  const opts = {
    rounds: Number(values.rounds),
    decisions: Number(values.decisions),
    keys: Number(values.keys),
    instances: Number(values.instances),
    turns: Number(values.turns),
  };
  const { on, off, offA, offB, roundMedian, controlMedian } = await runMetricsOverhead(opts);
  const fmt = (n: number) => `${(n / 1e6).toFixed(2)} M/s`;
  console.log(
    `lease-hit decisions per CPU-second, ${opts.instances} limiters with metrics and 2 × ${opts.instances} without, ${opts.rounds} rounds × ${opts.decisions} per side:`,
  );
  console.log(
    `  metrics off   ${fmt(off)}   (half A ${fmt(offA)}, half B ${fmt(offB)}: B / A ${(offB / offA).toFixed(3)}, rounds' median ${controlMedian.toFixed(3)})`,
  );
  console.log(
    `  metrics on    ${fmt(on)}   on / off ${(on / off).toFixed(3)} (rounds' median ${roundMedian.toFixed(3)}, ${(1e9 / on - 1e9 / off).toFixed(0)} ns per decision)`,
  );
}
