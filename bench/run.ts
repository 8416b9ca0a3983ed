/**
 * `npm run bench` — the whole suite, one table on stdout, progress on stderr.
 *   --quick        short runs (each case < 1 min)
 *   --smoke        a minimal run for the test suite: tiny durations, few contestants
 *   --case=a,b     cases to run (alias --only): see SECTIONS below
 *   --write        also write bench/RESULTS.md
 *   --no-pin       do not pin Node and redis-server to separate CPUs with taskset
 *   --redis-url=U  use this Redis instead of starting a private redis-server (keys are namespaced)
 */
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { runAdapter } from './adapter.js';
import { runAdapterCpu } from './adapter-cpu.js';
import type { BenchContext } from './context.js';
import { runHttp } from './http.js';
import { runLatencyRedis } from './latency-redis.js';
import { runMemory } from './memory.js';
import { runMetrics } from './metrics.js';
import { runMicro } from './micro.js';
import { canPin, NODE_CPU, pin, REDIS_CPU } from './pin.js';
import { PROFILES } from './profile.js';
import { openRedis } from './redis.js';
import { type BenchOutput, type Row, resultsTable, type TargetCheck, targetsTable } from './report.js';
import { runFleetRedis, runTailRedis } from './tail-redis.js';

const SECTIONS: Record<string, (ctx: BenchContext) => Promise<BenchOutput>> = {
  micro: runMicro,
  metrics: runMetrics,
  'latency-redis': runLatencyRedis,
  'tail-redis': runTailRedis,
  'fleet-redis': runFleetRedis,
  http: runHttp,
  adapter: runAdapter,
  'adapter-cpu': runAdapterCpu,
  memory: runMemory,
};

function args() {
  try {
    return parseArgs({
      options: {
        quick: { type: 'boolean', default: false },
        smoke: { type: 'boolean', default: false },
        write: { type: 'boolean', default: false },
        only: { type: 'string' },
        case: { type: 'string' },
        'no-pin': { type: 'boolean', default: false },
        'redis-url': { type: 'string' },
      },
    });
  } catch (err) {
    // A mistyped flag says so in one line, not in parseArgs' stack trace.
    console.error(`bench: ${(err as Error).message}; see the usage at the top of bench/run.ts`);
    process.exit(2);
  }
}
const { values } = args();
const profile = PROFILES[values.smoke ? 'smoke' : values.quick ? 'quick' : 'full'];
const only = (values.case ?? values.only)?.split(',') ?? Object.keys(SECTIONS);
for (const name of only) {
  if (!(name in SECTIONS)) {
    console.error(`bench: unknown case ${name}; known: ${Object.keys(SECTIONS).join(', ')}`);
    process.exit(2);
  }
}

function packageVersion(name: string): string {
  const url = new URL(`../node_modules/${name}/package.json`, import.meta.url);
  return (JSON.parse(readFileSync(url, 'utf8')) as { version: string }).version;
}

function gitCommit(): string {
  try {
    return execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
  } catch {
    return 'unknown';
  }
}

const started = new Date();
const loadAtStart = loadavg()[0] ?? 0;
const redis = await openRedis(values['redis-url']);
// Node on one CPU, redis-server on the other (a shared server given by URL is left alone).
const pinned = !values['no-pin'] && canPin() && pin(process.pid, NODE_CPU);
if (pinned && redis.pid !== undefined) pin(redis.pid, REDIS_CPU);
const ctx: BenchContext = {
  profile,
  redis,
  pinned,
  pinHttp: pinned && loadAtStart < cpus().length,
  runId: `bench:${randomUUID().slice(0, 8)}`,
  log: (m) => process.stderr.write(`[bench] ${m}\n`),
};
const rows: Row[] = [];
const targets: TargetCheck[] = [];
try {
  for (const name of only) {
    const t0 = Date.now();
    const out = await (SECTIONS[name] as (c: BenchContext) => Promise<BenchOutput>)(ctx);
    ctx.log(`${name} took ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    rows.push(...out.rows);
    targets.push(...out.targets);
  }
} finally {
  await redis.stop();
}
const seconds = (Date.now() - started.getTime()) / 1000;

const own = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
  version: string;
};
const machine = `${cpus().length} × ${cpus()[0]?.model.trim() ?? 'unknown CPU'}`;
const environment = [
  `date ${started.toISOString()}`,
  `commit ${gitCommit()}`,
  `profile ${profile.name} (${seconds.toFixed(0)} s)`,
  pinned
    ? `pinned: node CPU ${NODE_CPU}, redis-server CPU ${redis.pid === undefined ? '(shared, not pinned)' : REDIS_CPU}, HTTP servers ${ctx.pinHttp ? `CPU ${NODE_CPU} (load generator CPU ${REDIS_CPU})` : 'not pinned (machine loaded at start)'}`
    : 'not pinned',
  `node ${process.version}`,
  `redis ${redis.version}`,
  `tokenlease ${own.version}`,
  `rate-limiter-flexible ${packageVersion('rate-limiter-flexible')}`,
  `autocannon ${packageVersion('autocannon')}`,
  `ioredis ${packageVersion('ioredis')}`,
  `lru-cache ${packageVersion('lru-cache')}`,
  machine,
  `load average ${loadAtStart.toFixed(1)} at start, ${(loadavg()[0] ?? 0).toFixed(1)} at end`,
].join(' · ');

const table = resultsTable(rows);
const goals = targetsTable(targets);
console.log(`${environment}\n\n${table}\n\n${goals}`);

if (values.write) {
  const template = readFileSync(new URL('./RESULTS.template.md', import.meta.url), 'utf8');
  const filled = template
    .replace('{{environment}}', environment)
    .replace('{{command}}', `npm run bench -- ${process.argv.slice(2).join(' ')}`.trim())
    .replace('{{targets}}', goals)
    .replace('{{table}}', table);
  writeFileSync(new URL('./RESULTS.md', import.meta.url), filled);
  ctx.log('wrote bench/RESULTS.md');
}
