/**
 * `npm run bench` — the whole suite, one table on stdout, progress on stderr.
 *   --quick        a short run (< 1 min)
 *   --smoke        a minimal run for the test suite: tiny durations, few contestants
 *   --only=a,b     sections to run: micro, cost, http, memory, metrics
 *   --write        also write bench/RESULTS.md
 *   --redis-url=U  use this Redis instead of starting a private redis-server (keys are namespaced)
 */
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import type { BenchContext } from './context.js';
import { runHttp } from './http.js';
import { runMemory } from './memory.js';
import { runMetrics } from './metrics.js';
import { runMicro } from './micro.js';
import { PROFILES } from './profile.js';
import { openRedis } from './redis.js';
import { runRedisCost } from './redis-cost.js';
import { type BenchOutput, type Row, resultsTable, type TargetCheck, targetsTable } from './report.js';

const SECTIONS: Record<string, (ctx: BenchContext) => Promise<BenchOutput>> = {
  micro: runMicro,
  cost: runRedisCost,
  http: runHttp,
  memory: runMemory,
  metrics: runMetrics,
};

const { values } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    smoke: { type: 'boolean', default: false },
    write: { type: 'boolean', default: false },
    only: { type: 'string' },
    'redis-url': { type: 'string' },
  },
});
const profile = PROFILES[values.smoke ? 'smoke' : values.quick ? 'quick' : 'full'];
const only = values.only?.split(',') ?? Object.keys(SECTIONS);
for (const name of only) {
  if (!(name in SECTIONS))
    throw new Error(`unknown section ${name}; known: ${Object.keys(SECTIONS).join(', ')}`);
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
const ctx: BenchContext = {
  profile,
  redis,
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
