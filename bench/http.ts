import { type ChildProcess, fork } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { type Counters, contestant, describeCounters } from './contestants.js';
import type { BenchContext } from './context.js';
import { ANY_CPU, NODE_CPU, pin, REDIS_CPU } from './pin.js';
import { type BenchOutput, ms, percentSpread, type Row, si, signedMs, type TargetCheck } from './report.js';
import { median, quantileSorted, summarize } from './stats.js';

const BASELINE = 'none';
const OURS = 'tokenlease-redis';
const MAP = 'map';
/** Issue 11: throughput within 5 points of the in-process Map bucket, p99 within 20 % of its p99. */
const POINTS_BEHIND_MAP = 5;
const P99_OVER_MAP = 1.2;
/** autocannon stops on a sample tick; its 1 s default would stretch every run to whole seconds. */
const SAMPLE_MS = 100;

interface ServerStats {
  readonly refused: number;
  readonly errors: number;
  readonly counters?: Counters;
}

export interface Server {
  readonly id: string;
  readonly child: ChildProcess;
  readonly url: string;
}

async function reply<T>(child: ChildProcess, key: string): Promise<T> {
  for (;;) {
    const [message] = (await once(child, 'message')) as [Record<string, unknown>];
    if (key in message) return message[key] as T;
  }
}

/**
 * Starts one server process (`script` in bench/, answering the IPC protocol of http-server.ts).
 * With `ctx.pinHttp` the server gets NODE_CPU to itself and the load generator (this process)
 * moves next to Redis: see `withLoadGeneratorPinned`.
 */
export async function startServer(
  ctx: BenchContext,
  script: string,
  id: string,
  args: readonly string[],
): Promise<Server> {
  const child = fork(fileURLToPath(new URL(script, import.meta.url)), args, {
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  if (ctx.pinHttp && child.pid !== undefined) pin(child.pid, NODE_CPU);
  const exited = once(child, 'exit').then(([code]) => {
    throw new Error(`HTTP server for ${id} exited with ${String(code)} before listening`);
  });
  const port = await Promise.race([reply<number>(child, 'port'), exited]);
  exited.catch(() => {});
  return { id, child, url: `http://127.0.0.1:${port}/` };
}

export async function stopServer(server: Server): Promise<ServerStats> {
  if (server.child.exitCode !== null) return { refused: 0, errors: 0 };
  server.child.send('stop');
  const stats = await reply<ServerStats>(server.child, 'stats');
  if (server.child.exitCode === null) await once(server.child, 'exit');
  return stats;
}

/** CPU time the server process has used so far, in µs. */
export async function serverCpu(server: Server): Promise<number> {
  server.child.send('cpu');
  return reply<number>(server.child, 'cpuUs');
}

async function serverStats(server: Server): Promise<ServerStats> {
  server.child.send('stats');
  return reply<ServerStats>(server.child, 'stats');
}

export interface Load {
  readonly requests: number;
  readonly rps: number;
  readonly p50: number;
  readonly p99: number;
  readonly p999: number;
  readonly refused: number;
  readonly failed: number;
}

/** One autocannon run; latencies come from its per-response timings (µs resolution, not its ms histogram). */
export function load(url: string, connections: number, durationMs: number): Promise<Load> {
  return new Promise((resolve, reject) => {
    const latencies: number[] = [];
    const instance = autocannon(
      { url, connections, duration: durationMs / 1000, pipelining: 1, sampleInt: SAMPLE_MS },
      (err, result) => {
        if (err) return reject(err);
        const sorted = Float64Array.from(latencies).sort();
        resolve({
          requests: latencies.length,
          rps: latencies.length / result.duration,
          p50: quantileSorted(sorted, 0.5),
          p99: quantileSorted(sorted, 0.99),
          p999: quantileSorted(sorted, 0.999),
          refused: result.statusCodeStats['429']?.count ?? 0,
          failed:
            result.errors + result.timeouts + (result.non2xx - (result.statusCodeStats['429']?.count ?? 0)),
        });
      },
    );
    instance.on('response', (_client, _status, _bytes, time) => {
      latencies.push(time);
    });
  });
}

interface Series {
  rps: number[];
  /** Server CPU µs per request at saturation: steadier than requests/s on a shared machine. */
  cpuUs: number[];
  satP50: number[];
  satP99: number[];
  satP999: number[];
  p50: number[];
  p99: number[];
  p999: number[];
  refused: number;
  failed: number;
}

const emptySeries = (): Series => ({
  rps: [],
  cpuUs: [],
  satP50: [],
  satP99: [],
  satP999: [],
  p50: [],
  p99: [],
  p999: [],
  refused: 0,
  failed: 0,
});

/** Per-round differences to the baseline of the same round, then their median: back to back, paired. */
function pairedMedian(
  ours: readonly number[],
  base: readonly number[],
  f: (a: number, b: number) => number,
): number {
  return median(ours.map((v, i) => f(v, base[i] as number)));
}

/** tokenlease against the Map in one back-to-back pair of short windows. */
interface PairGap {
  /** Points of the Map's requests/s tokenlease was behind. */
  readonly points: number;
  /** tokenlease's p99 over the Map's. */
  readonly p99Ratio: number;
}

/**
 * Issue 11's HTTP targets: tokenlease against the in-process Map bucket, both from the back-to-back
 * pairs (`pairs`): throughput in points of the Map's requests/s, p99 as the median of the pairs'
 * ratios. The rounds' ratio (their medians' quotient) is shown beside it: the two run seconds
 * apart there, and one disturbed second of the shared machine moves one of them alone.
 */
function mapTargets(
  series: ReadonlyMap<string, Series>,
  pairs: readonly PairGap[],
  name: string,
  connections: number,
): TargetCheck[] {
  const map = series.get(MAP);
  const ours = series.get(OURS);
  if (!map || !ours || pairs.length === 0) return [];
  const gap = summarize(pairs.map((p) => p.points));
  const p99 = summarize(pairs.map((p) => p.p99Ratio));
  const roundsP99 = median(ours.satP99) / median(map.satP99);
  return [
    {
      target: `HTTP, ${name}, ${connections} connections: tokenlease (Redis) within ${POINTS_BEHIND_MAP} points of the Map bucket's throughput, p99 ≤ ${P99_OVER_MAP}× the Map's`,
      measured: `${Math.abs(gap.median).toFixed(1)} ± ${gap.se.toFixed(1)} points ${gap.median >= 0 ? 'behind' : 'ahead of'} the Map; p99 ${p99.median.toFixed(2)} ± ${p99.se.toFixed(2)}× the Map's (medians ± SE of ${gap.rounds} back-to-back pairs; the rounds' p99 ${median(ours.satP99).toFixed(2)} ms = ${roundsP99.toFixed(2)}×); ${ours.refused} refused`,
      met: gap.median <= POINTS_BEHIND_MAP && p99.median <= P99_OVER_MAP && ours.refused === 0,
    },
  ];
}

/**
 * One round's order: the servers rotated round by round, the two a target compares (`pair`)
 * adjacent among them, which of them goes first alternating. A gap between the two is then taken
 * at nearly the same moment of the shared machine.
 */
export function roundOrder(servers: readonly Server[], pair: readonly string[], round: number): Server[] {
  const paired = servers.filter((s) => pair.includes(s.id));
  if (round % 2 === 1) paired.reverse();
  const slots: Server[][] = [...servers.filter((s) => !pair.includes(s.id)).map((s) => [s]), paired];
  const turn = round % slots.length;
  return [...slots.slice(turn), ...slots.slice(0, turn)].flat();
}

function keysName(keys: number): string {
  return keys === 1 ? '1 key' : `${keys / 1000}k Zipf keys`;
}

/**
 * Requests/s at saturation (closed loop, many connections) and latency with one connection (no
 * queueing: what the limiter adds to a request), for each contestant back to back in every round.
 */
export async function runHttp(ctx: BenchContext): Promise<BenchOutput> {
  const rows: Row[] = [];
  const targets: TargetCheck[] = [];
  await withLoadGeneratorPinned(ctx, async () => {
    for (const keys of ctx.profile.http.keys) {
      const out = await runKeySet(ctx, keys);
      rows.push(...out.rows);
      targets.push(...out.targets);
    }
  });
  return { rows, targets };
}

/**
 * Places this process (autocannon) for an HTTP section: next to Redis when the servers are pinned,
 * else on any CPU so the servers it forks inherit that too. Restores NODE_CPU afterwards.
 */
export async function withLoadGeneratorPinned<T>(ctx: BenchContext, run: () => Promise<T>): Promise<T> {
  if (!ctx.pinned) return run();
  pin(process.pid, ctx.pinHttp ? REDIS_CPU : ANY_CPU);
  try {
    return await run();
  } finally {
    pin(process.pid, NODE_CPU);
  }
}

/**
 * tokenlease's throughput and p99 against the Map (`pair`: [tokenlease, Map]) in `http.pairs`
 * short windows each, back to back, which goes first alternating. A 1 s window's requests/s move
 * ±4-6 % with the shared machine, and in the rounds the two run seconds apart (rewarms, the
 * 1-connection latency runs): a 5-point target is resolved only this way, as in bench/adapter.ts.
 * tokenlease is rewarmed first: it idled through the round's other servers, longer than it keeps
 * an idle key's state.
 */
async function backToBackGaps(ctx: BenchContext, pair: readonly Server[], round: number): Promise<PairGap[]> {
  const { http } = ctx.profile;
  const [ours, map] = pair as [Server, Server];
  if (http.rewarmMs > 0) await load(ours.url, http.connections, http.rewarmMs);
  const gaps: PairGap[] = [];
  for (let i = 0; i < http.pairs; i++) {
    const first = (round + i) % 2 === 0 ? ours : map;
    const second = first === ours ? map : ours;
    const a = await load(first.url, http.connections, http.pairMs);
    const b = await load(second.url, http.connections, http.pairMs);
    const [o, m] = first === ours ? [a, b] : [b, a];
    gaps.push({ points: 100 * (1 - o.rps / m.rps), p99Ratio: o.p99 / m.p99 });
  }
  return gaps;
}

async function runKeySet(ctx: BenchContext, keys: number): Promise<BenchOutput> {
  const { http } = ctx.profile;
  const name = keysName(keys);
  const servers: Server[] = [];
  const series = new Map<string, Series>();
  const notes = new Map<string, string>();
  /** Each server's warm-up: throughput and CPU per request from a fresh start. */
  const cold = new Map<string, { rps: number; cpuUs: number }>();
  /** tokenlease against the Map, per back-to-back pair. */
  const pairGaps: PairGap[] = [];
  try {
    const started = await Promise.allSettled(
      http.contestants.map((id) =>
        startServer(ctx, './http-server.ts', id, [
          id,
          ctx.redis.url,
          `${ctx.runId}:http:${keys}:${id}:`,
          String(keys),
        ]),
      ),
    );
    for (const r of started) if (r.status === 'fulfilled') servers.push(r.value);
    for (const r of started) if (r.status === 'rejected') throw r.reason;
    for (const s of servers) {
      series.set(s.id, emptySeries());
      ctx.log(`http: ${name}, warming ${s.id}`);
      const cpuBefore = await serverCpu(s);
      const warm = await load(s.url, http.connections, http.warmMs);
      cold.set(s.id, { rps: warm.rps, cpuUs: ((await serverCpu(s)) - cpuBefore) / warm.requests });
    }
    const before = new Map<string, Counters | undefined>();
    for (const s of servers) before.set(s.id, (await serverStats(s)).counters);
    const pair = servers.filter((s) => s.id === OURS || s.id === MAP);
    for (let round = 0; round < http.rounds; round++) {
      for (const s of roundOrder(servers, [OURS, MAP], round)) {
        ctx.log(`http: ${name}, round ${round + 1}/${http.rounds}, ${s.id}`);
        const data = series.get(s.id) as Series;
        if (http.rewarmMs > 0) await load(s.url, http.connections, http.rewarmMs);
        const cpuBefore = await serverCpu(s);
        const sat = await load(s.url, http.connections, http.ms);
        data.cpuUs.push(((await serverCpu(s)) - cpuBefore) / sat.requests);
        const one = await load(s.url, 1, http.ms);
        data.rps.push(sat.rps);
        data.satP50.push(sat.p50);
        data.satP99.push(sat.p99);
        data.satP999.push(sat.p999);
        data.p50.push(one.p50);
        data.p99.push(one.p99);
        data.p999.push(one.p999);
        data.refused += sat.refused + one.refused;
        data.failed += sat.failed + one.failed;
      }
      if (pair.length === 2) pairGaps.push(...(await backToBackGaps(ctx, pair, round)));
    }
    for (const s of servers) {
      const start = before.get(s.id);
      const end = (await serverStats(s)).counters;
      if (start && end) notes.set(s.id, describeCounters(start, end));
    }
  } finally {
    await Promise.all(servers.map(stopServer));
  }

  const base = series.get(BASELINE);
  const rows: Row[] = [];
  const targets: TargetCheck[] = mapTargets(series, pairGaps, name, http.connections);
  const coldBase = cold.get(BASELINE);
  for (const id of http.contestants) {
    const data = series.get(id) as Series;
    const label = contestant(id).label;
    const isBase = id === BASELINE;
    const thr = summarize(data.rps);
    const loss = base && !isBase ? pairedMedian(data.rps, base.rps, (a, b) => 1 - a / b) : 0;
    const own = notes.get(id);
    const check = `${data.refused} refused (429)${data.failed > 0 ? `, ${data.failed} failed` : ''}`;
    rows.push({
      bench: 'http',
      case: `throughput, ${http.connections} connections, ${name}`,
      contestant: label,
      value: `${si(thr.median)} req/s`,
      spread: percentSpread(thr),
      vs: isBase ? 'baseline' : `${loss >= 0 ? '−' : '+'}${Math.abs(100 * loss).toFixed(1)}% throughput`,
      note: `p50/p99/p99.9 ${[data.satP50, data.satP99, data.satP999].map((v) => median(v).toFixed(2)).join('/')} ms; ${check}${own ? `; ${own}` : ''}`,
    });
    // The warm-up, from a fresh server: every key is seen for the first time (one measurement).
    const start = cold.get(id);
    if (start) {
      const added = coldBase && !isBase ? start.cpuUs / coldBase.cpuUs - 1 : 0;
      rows.push({
        bench: 'http',
        case: `cold start: the first ${http.warmMs / 1000} s after start, ${http.connections} connections, ${name}`,
        contestant: label,
        value: `${si(start.rps)} req/s`,
        spread: '',
        vs: isBase ? 'baseline' : `${added >= 0 ? '+' : '−'}${Math.abs(100 * added).toFixed(1)}% CPU`,
        note: `server CPU ${start.cpuUs.toFixed(1)} µs per request; one run, not in the rounds`,
      });
    }
    const cpu = summarize(data.cpuUs);
    // CPU time hardly drifts with the machine's load, so medians compare directly (pairs add noise).
    const cpuAdded = base && !isBase ? cpu.median / median(base.cpuUs) - 1 : 0;
    rows.push({
      bench: 'http',
      case: `server CPU per request, ${http.connections} connections, ${name}`,
      contestant: label,
      value: `${cpu.median.toFixed(1)} µs`,
      spread: percentSpread(cpu),
      vs: isBase ? 'baseline' : `${cpuAdded >= 0 ? '+' : '−'}${Math.abs(100 * cpuAdded).toFixed(1)}% CPU`,
      note: 'process.cpuUsage() of the server over the throughput run',
    });
    for (const [pct, values, baseValues] of [
      ['p50', data.p50, base?.p50],
      ['p99', data.p99, base?.p99],
      ['p99.9', data.p999, base?.p999],
    ] as const) {
      const s = summarize(values);
      const added = baseValues && !isBase ? pairedMedian(values, baseValues, (a, b) => a - b) : 0;
      rows.push({
        bench: 'http',
        case: `latency ${pct}, 1 connection, ${name}`,
        contestant: label,
        value: ms(s.median),
        spread: percentSpread(s),
        vs: isBase ? 'baseline' : `${signedMs(added)} added`,
        note: '',
      });
    }
  }
  return { rows, targets };
}
