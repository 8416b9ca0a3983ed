import { accessSync, constants, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { ConfigError, type PolicyConfig, RedisStore } from '../src/index.js';
import { type RunOptions, simulate } from './engine.js';
import { renderHtml } from './html.js';
import { failsRun, type ScenarioReport, summarize } from './report.js';
import { type BalancerConfig, parseScenario, type Scenario, type ScenarioInput } from './scenario.js';
import { POLICIES, SUITE } from './suite.js';
import { formatFailures, formatTable, LEGEND } from './table.js';

const USAGE = `Usage: npm run sim -- [options]

Runs scenarios of simulated gateway instances sharing one store in virtual time and compares what
they admit with an exact central limiter fed the same requests. With no options: the default suite
on the in-memory store.

Options:
  --scenario NAMES    comma-separated scenario names, a trailing * matches a prefix
                      (e.g. 'tail-*'; default: all; see --list)
  --list              print the scenario names and descriptions, then exit
  --instances N       run N instances throughout (replaces the scenario's autoscaling)
  --balancer B        round-robin | random | sticky | zipf[:S] | weighted:W1,W2,...
  --policy P          a policy name (${Object.keys(POLICIES).join(', ')}) or policy JSON,
                      e.g. '{"algorithm":"token-bucket","rate":50,"burst":100,"lease":{"maxFraction":0.05}}'
  --duration D        virtual duration, e.g. 30s, 2m, 500ms (the scenario's timeline is rescaled)
  --seed N            seed for every random choice (default: each scenario's own, 1)
  --json              print the reports as JSON instead of the table
  --out FILE          also write a self-contained HTML report with plots
  --redis URL         run against a real redis-server (the virtual time is passed as the scripts' clock)
  --prefix P          key prefix on Redis (default: a fresh one per run)
  --replay JSON       run one scenario given as JSON (printed by the property test when it fails)
  --strict            missed targets of pending scenarios (open work) fail the run too
  -h, --help          this text

Exit status: 0 when every check passed, 1 when a scenario missed a check, 2 on bad options. A
scenario marked pending (its targets belong to open work) reports missed targets without failing
the run, unless --strict; a missed bound (the envelope the design guarantees) always fails it.`;

/** A problem with the command line: printed without a stack trace, exit code 2. */
class UsageError extends Error {}

interface Options {
  scenarios: ScenarioInput[];
  json: boolean;
  strict: boolean;
  out: string | undefined;
  redis: string | undefined;
  prefix: string | undefined;
}

function parseDurationOption(text: string): number {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(text.trim());
  const ms = match
    ? Number(match[1]) * { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[match[2] ?? 'ms']!
    : Number.NaN;
  if (!(ms > 0))
    throw new UsageError(
      `--duration: expected a duration like 30s, 2m or 500ms, got ${JSON.stringify(text)}`,
    );
  return ms;
}

function parseBalancer(text: string): BalancerConfig {
  const [kind, arg] = text.split(':', 2) as [string, string | undefined];
  switch (kind) {
    case 'round-robin':
    case 'rr':
      return { kind: 'round-robin' };
    case 'random':
    case 'sticky':
      return { kind };
    case 'zipf':
      return { kind, s: arg === undefined ? 1 : Number(arg) };
    case 'weighted':
      return { kind, weights: (arg ?? '').split(',').map(Number) };
    default:
      throw new UsageError(
        `--balancer: expected round-robin, random, sticky, zipf[:S] or weighted:W1,W2,..., got ${JSON.stringify(text)}`,
      );
  }
}

function parsePolicy(text: string): PolicyConfig {
  const named = POLICIES[text];
  if (named) return named;
  if (!text.trim().startsWith('{')) {
    throw new UsageError(
      `--policy: expected one of ${Object.keys(POLICIES).join(', ')} or a JSON object, got ${JSON.stringify(text)}`,
    );
  }
  try {
    return JSON.parse(text) as PolicyConfig;
  } catch (err) {
    throw new UsageError(`--policy: not valid JSON (${(err as Error).message})`);
  }
}

function positiveInteger(text: string, option: string): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n < 0)
    throw new UsageError(`${option}: expected a whole number, got ${JSON.stringify(text)}`);
  return n;
}

/** Rescales every time in the scenario's timeline, so a shorter run keeps its shape. */
function withDuration(s: ScenarioInput, durationMs: number): ScenarioInput {
  // A replayed scenario may be malformed; validation reports that once the overrides are applied.
  if (
    typeof s.durationMs !== 'number' ||
    !Array.isArray(s.autoscale ?? []) ||
    typeof s.traffic !== 'object'
  ) {
    return { ...s, durationMs };
  }
  const k = durationMs / s.durationMs;
  const demand = s.traffic?.demand;
  return {
    ...s,
    durationMs,
    autoscale: s.autoscale?.map((e) => ({ ...e, atMs: e.atMs * k })),
    traffic: {
      ...s.traffic,
      demand: demand?.shape === 'step' ? { ...demand, atMs: demand.atMs * k } : demand,
    },
  };
}

function parseOptions(argv: string[]): Options | 'help' | 'list' {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(argv);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const v = parsed.values;
  if (v.help) return 'help';
  if (v.list) return 'list';
  if (parsed.positionals.length > 0)
    throw new UsageError(`unexpected argument ${JSON.stringify(parsed.positionals[0])}`);

  let scenarios: ScenarioInput[];
  if (v.replay !== undefined) {
    if (v.scenario !== undefined) throw new UsageError('--replay and --scenario cannot be combined');
    try {
      scenarios = [JSON.parse(v.replay) as ScenarioInput];
    } catch (err) {
      throw new UsageError(`--replay: not valid JSON (${(err as Error).message})`);
    }
  } else if (v.scenario !== undefined) {
    const names = v.scenario.split(',').map((n) => n.trim());
    scenarios = names.flatMap((name) => {
      const found = name.endsWith('*')
        ? SUITE.filter((s) => s.name.startsWith(name.slice(0, -1)))
        : SUITE.filter((s) => s.name === name);
      if (found.length === 0)
        throw new UsageError(
          `--scenario: unknown scenario ${JSON.stringify(name)}; known: ${SUITE.map((s) => s.name).join(', ')}`,
        );
      return found;
    });
  } else {
    scenarios = SUITE;
  }

  const duration = v.duration === undefined ? undefined : parseDurationOption(v.duration);
  const instances = v.instances === undefined ? undefined : positiveInteger(v.instances, '--instances');
  const balancer = v.balancer === undefined ? undefined : parseBalancer(v.balancer);
  const policy = v.policy === undefined ? undefined : parsePolicy(v.policy);
  const seed = v.seed === undefined ? undefined : positiveInteger(v.seed, '--seed');
  if (scenarios.some((s) => typeof s !== 'object' || s === null || Array.isArray(s))) {
    throw new UsageError('--replay: expected a scenario object');
  }
  scenarios = scenarios.map((s) => {
    let out = duration !== undefined ? withDuration(s, duration) : s;
    if (instances !== undefined) out = { ...out, instances, autoscale: [] };
    if (balancer !== undefined) out = { ...out, balancer };
    if (policy !== undefined) out = { ...out, policy };
    if (seed !== undefined) out = { ...out, seed };
    return out;
  });
  if (v.prefix !== undefined && v.redis === undefined) throw new UsageError('--prefix needs --redis');
  if (v.out !== undefined) {
    try {
      accessSync(dirname(resolve(v.out)), constants.W_OK);
    } catch {
      throw new UsageError(`--out: cannot write to the directory of ${v.out}`);
    }
  }
  return {
    scenarios,
    json: v.json ?? false,
    strict: v.strict ?? false,
    out: v.out,
    redis: v.redis,
    prefix: v.prefix,
  };
}

function parse(argv: string[]) {
  return parseArgs({
    args: argv,
    strict: true,
    allowPositionals: true,
    options: {
      scenario: { type: 'string' },
      list: { type: 'boolean' },
      instances: { type: 'string' },
      balancer: { type: 'string' },
      policy: { type: 'string' },
      duration: { type: 'string' },
      seed: { type: 'string' },
      json: { type: 'boolean' },
      out: { type: 'string' },
      redis: { type: 'string' },
      prefix: { type: 'string' },
      replay: { type: 'string' },
      strict: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
}

/** Validates every scenario up front, so a typo fails before minutes of simulation. */
function validate(inputs: ScenarioInput[]): Scenario[] {
  return inputs.map((input, i) => {
    try {
      return parseScenario(input);
    } catch (err) {
      if (err instanceof ConfigError) {
        const name = typeof input?.name === 'string' ? input.name : `#${i + 1}`;
        throw new UsageError(`scenario ${name}: ${err.message}`);
      }
      throw err;
    }
  });
}

function progressBar(stderr: Io['stderr']): { update(label: string, fraction: number): void; done(): void } {
  if (!stderr.isTTY) return { update() {}, done() {} };
  let last = '';
  return {
    update(label, fraction) {
      const width = 30;
      const filled = Math.round(fraction * width);
      const line = `${label.padEnd(34).slice(0, 34)} [${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${Math.round(fraction * 100)}%`;
      if (line !== last) stderr.write(`\r${line}`);
      last = line;
    },
    done() {
      stderr.write('\r\x1b[2K');
    },
  };
}

async function connect(url: string): Promise<Redis> {
  let client: Redis;
  try {
    client = new Redis(url, {
      // Used directly by RedisStore: no queueing, no blind re-sends (see RedisStore).
      enableOfflineQueue: false,
      autoResendUnfulfilledCommands: false,
      lazyConnect: true,
      connectTimeout: 3000,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
  } catch (err) {
    throw new UsageError(`--redis: ${(err as Error).message}`);
  }
  client.on('error', () => {});
  try {
    await client.connect();
  } catch (err) {
    client.disconnect();
    throw new UsageError(`--redis: cannot connect to ${url} (${(err as Error).message})`);
  }
  return client;
}

/** Where the CLI writes; `process` in production, buffers in tests. */
export interface Io {
  stdout: { write(text: string): unknown };
  stderr: { write(text: string): unknown; isTTY?: boolean };
}

/**
 * The whole command line: returns the exit code (0 all checks passed, 1 a check missed, 2 bad
 * options). Problems with the options are printed as one message, never as a stack trace.
 */
export async function run(argv: string[], io: Io): Promise<number> {
  try {
    return await main(argv, io);
  } catch (err) {
    if (err instanceof UsageError) {
      io.stderr.write(`sim: ${err.message}\nRun 'npm run sim -- --help' for the options.\n`);
      return 2;
    }
    throw err;
  }
}

async function main(argv: string[], io: Io): Promise<number> {
  const options = parseOptions(argv);
  if (options === 'help') {
    io.stdout.write(`${USAGE}\n`);
    return 0;
  }
  if (options === 'list') {
    const width = Math.max(...SUITE.map((s) => s.name.length));
    for (const s of SUITE) io.stdout.write(`${s.name.padEnd(width)} ${s.description ?? ''}\n`);
    return 0;
  }
  const scenarios = validate(options.scenarios);
  const client = options.redis === undefined ? undefined : await connect(options.redis);
  const prefix = options.prefix ?? `tlsim:${process.pid}-${Date.now().toString(36)}:`;
  const progress = progressBar(io.stderr);
  const reports: ScenarioReport[] = [];
  try {
    for (const [i, scenario] of scenarios.entries()) {
      const label = `${i + 1}/${scenarios.length} ${scenario.name}`;
      const run: RunOptions = { onProgress: (f) => progress.update(label, f) };
      if (client) {
        // One prefix per scenario: no run sees another's buckets.
        run.sharedStore = (clock) =>
          new RedisStore({ client, now: clock.now, prefix: `${prefix}${i}:`, timeoutMs: 5000 });
      }
      reports.push(summarize(await simulate(scenario, run)));
    }
  } finally {
    progress.done();
    client?.disconnect();
  }

  const store = client ? `redis ${options.redis}` : 'MemoryStore';
  if (options.json) {
    io.stdout.write(`${JSON.stringify({ store, reports }, null, 2)}\n`);
  } else {
    io.stdout.write(`store: ${store}\n\n${formatTable(reports)}\n\n${LEGEND}\n`);
    const failures = formatFailures(reports);
    if (failures) io.stdout.write(`\n${failures}\n`);
  }
  if (options.out !== undefined) {
    const seeds = new Set(scenarios.map((s) => s.seed));
    const html = renderHtml(reports, {
      store,
      seed: seeds.size === 1 ? scenarios[0]!.seed : null,
      command: ['npm run sim', ...(argv.length ? ['--', ...argv] : [])].join(' '),
    });
    try {
      writeFileSync(options.out, html);
    } catch (err) {
      throw new UsageError(
        `--out: cannot write ${options.out} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`,
      );
    }
    io.stderr.write(`HTML report: ${options.out}\n`);
  }
  const strict = { strict: options.strict };
  return reports.some((r) => r.checks.some((c) => failsRun(r, c, strict))) ? 1 : 0;
}
