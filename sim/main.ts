import { mkdirSync, writeFileSync } from 'node:fs';
import { basename, dirname, resolve } from 'node:path';
import { ConfigError, type PolicyConfig, RedisStore, TokenleaseError } from '../src/index.js';
import {
  parse,
  parseBalancer,
  parseDuration,
  parseFields,
  parseFormat,
  parseFractions,
  parseInstances,
  parsePolicy,
  UsageError,
  type Values,
  wholeNumber,
} from './args.js';
import { type Deployment, plansFile, singlePolicy } from './deployment.js';
import { type RunOptions, simulate } from './engine.js';
import { type FleetPoint, type FleetReport, fleetTable } from './fleet.js';
import { renderHtml } from './html.js';
import { policyModel } from './policies.js';
import { failsRun, type ScenarioReport, summarize } from './report.js';
import { MAX_INSTANCES, parseScenario, type Scenario, type ScenarioInput } from './scenario.js';
import { POLICIES, SUITE } from './suite.js';
import { formatFailures, formatTable, LEGEND } from './table.js';
import { type FieldMap, type LogFormat, readLog, type SkippedLines } from './traffic.js';

const usage = (program: string) => `Usage: ${program} [options]

Runs simulated gateway instances sharing one store in virtual time and compares what they admit
with an exact central limiter (the same policies in exact mode) fed the same requests. Three ways:
our scenarios (no options: the default suite), your policy (--policy or --plans, on our
scenarios), your traffic (--traffic with --policy or --plans). In-memory store unless --redis.

Scenarios:
  --scenario NAMES    comma-separated scenario names, a trailing * matches a prefix
                      (e.g. 'tail-*'; default: all; see --list)
  --list              print the scenario names and descriptions, then exit
  --replay JSON       run one scenario given as JSON (printed by the property test when it fails)
  --duration D        virtual duration, e.g. 30s, 2m, 500ms (the scenario's timeline is rescaled)
Your limits:
  --policy P          a policy name (${Object.keys(POLICIES).join(', ')}), policy JSON or a JSON file,
                      e.g. '{"algorithm":"token-bucket","rate":50,"burst":100,"lease":{"maxFraction":0.05}}'
  --plans FILE        a plans file (YAML or JSON) as the HTTP middleware reads it: every request
                      through the rules its plan meets (the scenarios' keys are in the default plan)
Your traffic:
  --traffic FILE      replay a request log: JSON lines, CSV (with a header), nginx combined or
                      Envoy's default access-log format; read as a stream
  --format F          jsonl | csv | nginx | envoy (default: from the extension or the first line)
  --fields MAP        columns of the log, e.g. time=ts,key=api_key,cost=units,instance=pod,ip=addr
                      (fields: time, key, cost, method, path, request, instance)
Fleet:
  --instances N       N instances throughout (replaces autoscaling); a list such as 5,10,20,50
                      runs each and reports drift and cost per instance count (a what-if)
  --max-fraction F    lease sizes to compare, e.g. 0.02,0.05,0.1 (each × each instance count)
  --balancer B        round-robin | random | sticky | zipf[:S] | weighted:W1,W2,... | log
                      (log: the log's instance column; the default with --traffic when it has one)
Run:
  --seed N            seed for every random choice (default: each scenario's own, 1)
  --redis URL         run against a real redis-server (redis://host:port), or the Redis Cluster that
                      node belongs to; needs ioredis installed
  --prefix P          key prefix on Redis (default: a fresh one per run)
  --json              print the reports as JSON instead of the table
  --out FILE          also write a self-contained HTML report with plots
  --strict            missed targets of pending scenarios (open work) fail the run too
  -h, --help          this text

Exit status: 0 when every check passed, 1 when a scenario missed a check, 2 on bad options. The
suite's targets are for its scenarios as defined: with your policy or plans, or another
--instances, --balancer, --duration or --max-fraction, the checks are the bounds the design
guarantees, and an exact policy must match the exact limiter exactly. A scenario marked
pending (its targets belong to open work) reports missed targets without failing the run unless
--strict.`;

/** One simulation to run: a scenario, what the gateways deploy, and where the traffic comes from. */
interface RunPlan {
  scenario: Scenario;
  deployment: Deployment;
  traffic?: { file: string; format: LogFormat | undefined; fields: FieldMap; byInstance: boolean | 'auto' };
  /** Set for the runs of a fleet what-if. */
  fleet?: { base: string; instances: number; maxFraction: number | null };
}

interface Options {
  runs: RunPlan[];
  fleet: boolean;
  json: boolean;
  strict: boolean;
  out: string | undefined;
  redis: string | undefined;
  prefix: string | undefined;
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

/** The policy with leases of at most `maxFraction` of the limit (exact policies stay exact). */
function withMaxFraction(policy: PolicyConfig, maxFraction: number | null): PolicyConfig {
  const p = policy as PolicyConfig & { lease?: unknown };
  if (maxFraction === null || p.lease === 'exact') return policy;
  const lease = typeof p.lease === 'object' && p.lease !== null ? p.lease : {};
  return { ...p, lease: { ...lease, maxFraction } } as PolicyConfig;
}

/**
 * The scenario on the user's policy. The suite's targets (drift ≤ 2 % and store calls for our
 * default lease sizes) are not the user's: only an exact policy keeps one, matching the exact
 * limiter exactly; the bounds the design guarantees are checked for every policy. A scenario about
 * exact mode (its own policy is exact, e.g. exact-6x) runs the user's policy in exact mode.
 */
function targetsFor(s: ScenarioInput, policy: PolicyConfig): ScenarioInput {
  let applied = policy;
  let exact = false;
  try {
    if (policyModel(s.policy).isExact) applied = policyModel(policy).exact;
    exact = policyModel(applied).isExact;
  } catch {
    // Validation names the problem once the scenario is parsed.
  }
  const { pending: _, ...rest } = s;
  return { ...rest, policy: applied, expect: exact ? { maxAbsDriftPct: 0 } : {} };
}

function selectScenarios(v: Values): ScenarioInput[] {
  if (v.replay !== undefined) {
    if (v.scenario !== undefined) throw new UsageError('--replay and --scenario cannot be combined');
    let parsed: unknown;
    try {
      parsed = JSON.parse(v.replay);
    } catch (err) {
      throw new UsageError(`--replay: not valid JSON (${(err as Error).message})`);
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
      throw new UsageError('--replay: expected a scenario object');
    }
    return [parsed as ScenarioInput];
  }
  if (v.scenario === undefined) return SUITE;
  return v.scenario.split(',').flatMap((raw) => {
    const name = raw.trim();
    const found = name.endsWith('*')
      ? SUITE.filter((s) => s.name.startsWith(name.slice(0, -1)))
      : SUITE.filter((s) => s.name === name);
    if (found.length === 0) {
      throw new UsageError(
        `--scenario: unknown scenario ${JSON.stringify(name)}; known: ${SUITE.map((s) => s.name).join(', ')}`,
      );
    }
    return found;
  });
}

/** Validates a scenario up front, so a typo fails before minutes of simulation. */
function validate(input: ScenarioInput, index: number): Scenario {
  try {
    return parseScenario(input);
  } catch (err) {
    if (err instanceof ConfigError) {
      const name = typeof input?.name === 'string' ? input.name : `#${index + 1}`;
      throw new UsageError(`scenario ${name}: ${err.message}`);
    }
    throw err;
  }
}

/** A plans file's deployment; `exact`: every policy in exact mode (for a scenario about exact mode). */
function loadPlans(path: string, maxFraction: number | null, exact = false): Deployment {
  try {
    return plansFile(path, (p) => (exact ? policyModel(p).exact : withMaxFraction(p, maxFraction)));
  } catch (err) {
    if (err instanceof TokenleaseError) throw new UsageError(`--plans: ${err.message}`);
    throw err;
  }
}

function parseOptions(argv: string[]): Options | 'help' | 'list' {
  const { values: v, positionals } = parse(argv);
  if (v.help) return 'help';
  if (v.list) return 'list';
  if (positionals.length > 0) throw new UsageError(`unexpected argument ${JSON.stringify(positionals[0])}`);
  if (v.policy !== undefined && v.plans !== undefined)
    throw new UsageError('--policy and --plans cannot be combined');
  if (v.prefix !== undefined && v.redis === undefined) throw new UsageError('--prefix needs --redis');
  for (const option of ['format', 'fields'] as const) {
    if (v[option] !== undefined && v.traffic === undefined)
      throw new UsageError(`--${option} needs --traffic`);
  }

  const duration = v.duration === undefined ? undefined : parseDuration(v.duration);
  const counts = v.instances === undefined ? undefined : parseInstances(v.instances, MAX_INSTANCES);
  const fractions = v['max-fraction'] === undefined ? [null] : parseFractions(v['max-fraction']);
  const balancer = v.balancer === undefined ? undefined : parseBalancer(v.balancer);
  const policy = v.policy === undefined ? undefined : parsePolicy(v.policy);
  const seed = v.seed === undefined ? undefined : wholeNumber(v.seed, '--seed');
  const fleet = (counts !== undefined && counts.length > 1) || v['max-fraction'] !== undefined;
  const reshaped =
    counts !== undefined ||
    duration !== undefined ||
    balancer !== undefined ||
    v['max-fraction'] !== undefined;

  const runs: RunPlan[] = [];
  const addRuns = (
    base: ScenarioInput,
    deploymentFor: (maxFraction: number | null) => Deployment,
    traffic?: RunPlan['traffic'],
  ) => {
    for (const instances of counts ?? [undefined]) {
      for (const maxFraction of fractions) {
        let input = duration !== undefined ? withDuration(base, duration) : base;
        if (instances !== undefined) input = { ...input, instances, autoscale: [] };
        if (seed !== undefined) input = { ...input, seed };
        if (maxFraction !== null) input = { ...input, policy: withMaxFraction(input.policy, maxFraction) };
        // Our targets are for our scenarios as defined: another fleet, balancer, length or lease
        // size keeps only the bounds (and an exact policy's drift of 0).
        if (reshaped) input = targetsFor(input, input.policy);
        const scenario = validate(input, runs.length);
        if (traffic) scenario.replayOf = traffic.file;
        const plan: RunPlan = { scenario, deployment: deploymentFor(maxFraction) };
        if (traffic) plan.traffic = traffic;
        if (fleet) plan.fleet = { base: base.name, instances: scenario.instances, maxFraction };
        runs.push(plan);
      }
    }
  };

  if (v.traffic !== undefined) {
    if (v.scenario !== undefined || v.replay !== undefined) {
      throw new UsageError('--traffic replays a log: it cannot be combined with --scenario or --replay');
    }
    if (policy === undefined && v.plans === undefined) {
      throw new UsageError('--traffic needs the limits to simulate: --policy or --plans');
    }
    if (duration !== undefined)
      throw new UsageError('--duration does not apply to --traffic (the log has its own)');
    const byInstance =
      balancer === 'log' ? true : balancer !== undefined || counts !== undefined ? false : 'auto';
    const plansPath = v.plans;
    const deploymentFor = (f: number | null) =>
      plansPath !== undefined ? loadPlans(plansPath, f) : singlePolicy(withMaxFraction(policy!, f), 'policy');
    const first = deploymentFor(null);
    const base: ScenarioInput = {
      name: basename(v.traffic),
      description: '',
      policy: first.policies[Object.keys(first.policies)[0]!]!,
      durationMs: 1,
      balancer: balancer === undefined || balancer === 'log' ? { kind: 'round-robin' } : balancer,
      traffic: { demand: { shape: 'steady', load: 1 } },
    };
    addRuns(base, deploymentFor, {
      file: v.traffic,
      format: v.format === undefined ? undefined : parseFormat(v.format),
      fields: v.fields === undefined ? {} : parseFields(v.fields),
      byInstance,
    });
  } else {
    if (balancer === 'log')
      throw new UsageError('--balancer log needs --traffic (a log with an instance column)');
    for (let s of selectScenarios(v)) {
      if (balancer !== undefined) s = { ...s, balancer };
      if (policy !== undefined) {
        const own = targetsFor(s, policy);
        addRuns(own, (f) => singlePolicy(withMaxFraction(own.policy, f), 'scenario.policy'));
      } else if (v.plans !== undefined) {
        // The whole plans file, every rule a request meets, as the middleware would run it. The
        // scenario's keys are clients of the default plan; its demand is a multiple of the plan's
        // primary rule, which also names its targets (bounds only, or 0 % for exact mode).
        const path = v.plans;
        const plans = loadPlans(path, null);
        const own = targetsFor(s, plans.policies[plans.primary]!);
        const exact = policyModel(own.policy).isExact;
        const described = {
          ...own,
          description:
            `${own.description ?? ''} Through ${path}: each key a client of its default plan, demand in multiples of its rule ${JSON.stringify(plans.primary)}.`.trim(),
        };
        addRuns(described, (f) => loadPlans(path, f, exact));
      } else {
        addRuns(s, (f) => singlePolicy(withMaxFraction(s.policy as PolicyConfig, f), 'scenario.policy'));
      }
    }
  }

  return {
    runs,
    fleet,
    json: v.json ?? false,
    strict: v.strict ?? false,
    out: v.out,
    redis: v.redis,
    prefix: v.prefix,
  };
}

function progressBar(stderr: Io['stderr']): {
  update(label: string, done: string, fraction: number): void;
  done(): void;
} {
  if (!stderr.isTTY) return { update() {}, done() {} };
  let last = '';
  return {
    update(label, done, fraction) {
      const width = 30;
      const filled = Math.round(Math.min(1, fraction) * width);
      const line = `${label.padEnd(34).slice(0, 34)} [${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${done}`;
      // Clear the line first: a shorter line must not leave the end of a longer one behind.
      if (line !== last) stderr.write(`\r\x1b[2K${line}`);
      last = line;
    },
    done() {
      stderr.write('\r\x1b[2K');
    },
  };
}

/** ioredis is an optional peer dependency: loaded only for `--redis`. */
const loadIoredis = () => import('ioredis');

type Client = import('ioredis').Redis | import('ioredis').Cluster;

/**
 * A Redis client for `--redis`, or a UsageError saying why there is none. The URL may name any node
 * of a Redis Cluster: the client is then a Cluster client seeded with that node.
 */
async function connect(url: string): Promise<{ client: Client; cluster: boolean; close(): void }> {
  let ioredis: Awaited<ReturnType<typeof loadIoredis>>;
  try {
    ioredis = await loadIoredis();
  } catch {
    throw new UsageError('--redis needs the ioredis package next to tokenlease: npm install ioredis');
  }
  const options = {
    // Used directly by RedisStore: no queueing, no blind re-sends (see RedisStore).
    enableOfflineQueue: false,
    autoResendUnfulfilledCommands: false,
    lazyConnect: true,
    connectTimeout: 3000,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  };
  let client: import('ioredis').Redis;
  try {
    client = new ioredis.Redis(url, options);
  } catch (err) {
    throw new UsageError(`--redis: ${(err as Error).message}`);
  }
  let lastError: (Error & { code?: string }) | undefined;
  client.on('error', (err: Error) => {
    lastError = err;
  });
  try {
    await client.connect();
  } catch (err) {
    client.disconnect();
    const cause = lastError ?? (err as Error & { code?: string });
    const why =
      cause.code === 'ECONNREFUSED'
        ? 'connection refused: is redis-server running there?'
        : cause.code === 'ENOTFOUND'
          ? 'unknown host'
          : cause.message;
    throw new UsageError(`--redis: cannot connect to ${url} (${why})`);
  }
  const info = await client.info('cluster').catch(() => '');
  if (!/^cluster_enabled:1/m.test(info)) return { client, cluster: false, close: () => client.disconnect() };
  const { host, port, username, password, tls } = client.options;
  client.disconnect();
  const cluster = new ioredis.Cluster([{ host, port }], {
    // The settings RedisStore runs a Cluster with, so it needs no duplicate of its own.
    enableOfflineQueue: false,
    retryDelayOnFailover: 0,
    enableReadyCheck: false,
    lazyConnect: true,
    clusterRetryStrategy: () => null,
    redisOptions: { ...options, username, password, tls },
  });
  cluster.on('error', (err: Error) => {
    lastError = err;
  });
  try {
    await cluster.connect();
  } catch (err) {
    cluster.disconnect();
    throw new UsageError(
      `--redis: cannot connect to the cluster of ${url} (${(lastError ?? (err as Error)).message})`,
    );
  }
  return { client: cluster, cluster: true, close: () => cluster.disconnect() };
}

/** Where the CLI writes; `process` in production, buffers in tests. */
export interface Io {
  stdout: { write(text: string): unknown };
  stderr: { write(text: string): unknown; isTTY?: boolean };
}

/**
 * The whole command line: returns the exit code (0 all checks passed, 1 a check missed, 2 bad
 * options). Problems with the options are printed as one message, never as a stack trace.
 * `program` is how the user ran it, for messages: 'npm run sim --' or 'tokenlease sim'.
 */
export async function run(argv: string[], io: Io, program = 'npm run sim --'): Promise<number> {
  try {
    return await main(argv, io, program);
  } catch (err) {
    if (err instanceof UsageError) {
      io.stderr.write(`sim: ${err.message}\nRun '${program} --help' for the options.\n`);
      return 2;
    }
    throw err;
  }
}

/** `run` on the real process: sets the exit code; a bug (not a usage problem) prints its stack. */
export function runProcess(argv: string[], program: string): void {
  run(argv, process, program).then(
    (code) => {
      process.exitCode = code;
    },
    (err: unknown) => {
      process.stderr.write(`sim: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
      process.exitCode = 1;
    },
  );
}

async function main(argv: string[], io: Io, program: string): Promise<number> {
  const options = parseOptions(argv);
  if (options === 'help') {
    io.stdout.write(`${usage(program)}\n`);
    return 0;
  }
  if (options === 'list') {
    const width = Math.max(...SUITE.map((s) => s.name.length));
    for (const s of SUITE) {
      const description = validate(s, 0).description;
      io.stdout.write(`${s.name.padEnd(width)} ${description}\n`);
    }
    return 0;
  }
  if (options.out !== undefined) {
    try {
      mkdirSync(dirname(resolve(options.out)), { recursive: true });
    } catch (err) {
      throw new UsageError(
        `--out: cannot create the directory of ${options.out} (${(err as NodeJS.ErrnoException).code})`,
      );
    }
  }
  const redis = options.redis === undefined ? undefined : await connect(options.redis);
  const prefix = options.prefix ?? `tlsim:${process.pid}-${Date.now().toString(36)}:`;
  const progress = progressBar(io.stderr);
  const reports: ScenarioReport[] = [];
  const notes: string[] = [];
  try {
    for (const [i, plan] of options.runs.entries()) {
      const label = `${i + 1}/${options.runs.length} ${plan.scenario.name}`;
      const runOptions: RunOptions = { deployment: plan.deployment };
      if (redis) {
        // One prefix per run: no run sees another's buckets.
        runOptions.sharedStore = (clock) =>
          new RedisStore({ client: redis.client, now: clock.now, prefix: `${prefix}${i}:`, timeoutMs: 5000 });
      }
      let skipped: SkippedLines | undefined;
      if (plan.traffic) {
        const t = plan.traffic;
        skipped = { count: 0, first: undefined };
        const records = readLog(t.file, { format: t.format, fields: t.fields }, skipped);
        const first = await records.next().catch((err: unknown) => {
          if (err instanceof ConfigError || (err as NodeJS.ErrnoException).code !== undefined) {
            throw new UsageError(`--traffic: ${(err as Error).message.replace(/^Invalid `traffic`: /, '')}`);
          }
          throw err;
        });
        const byInstance = t.byInstance === 'auto' ? first.value?.instance !== undefined : t.byInstance;
        if (byInstance && first.value?.instance === undefined) {
          throw new UsageError(
            `--balancer log: ${t.file} has no instance column (name one with --fields instance=COLUMN)`,
          );
        }
        runOptions.replay = { records: prepend(first, records), byInstance };
        runOptions.onProgress = (ms) => progress.update(label, `${(ms / 1000).toFixed(0)} s of log`, 0);
      } else {
        runOptions.onProgress = (f) => progress.update(label, `${Math.round(f * 100)}%`, f);
      }
      const report = summarize(await simulate(plan.scenario, runOptions));
      if (plan.traffic) {
        report.scenario.description = replayDescription(report, plan);
        if (skipped && skipped.count > 0)
          notes.push(
            `${plan.scenario.name}: skipped ${skipped.count} line(s) that could not be read; the first: ${skipped.first}`,
          );
      }
      if (plan.fleet) report.fleet = plan.fleet;
      reports.push(report);
    }
  } finally {
    progress.done();
    redis?.close();
  }

  const store = redis ? `redis ${redis.cluster ? 'cluster ' : ''}${options.redis}` : 'MemoryStore';
  const fleets = options.fleet ? fleetReports(reports) : [];
  if (options.json) {
    io.stdout.write(`${JSON.stringify({ store, reports, fleets }, null, 2)}\n`);
  } else {
    io.stdout.write(`store: ${store}\n\n${formatTable(reports)}\n\n${LEGEND}\n`);
    for (const f of fleets) io.stdout.write(`\n${fleetTable(f)}\n`);
    const failures = formatFailures(reports);
    if (failures) io.stdout.write(`\n${failures}\n`);
    for (const n of notes) io.stdout.write(`\n${n}\n`);
  }
  if (options.out !== undefined) {
    const seeds = new Set(options.runs.map((r) => r.scenario.seed));
    const html = renderHtml(reports, fleets, {
      store,
      seed: seeds.size === 1 ? options.runs[0]!.scenario.seed : null,
      command: [
        program.replace(/ --$/, ''),
        ...(argv.length ? [program.endsWith('--') ? '--' : '', ...argv] : []),
      ]
        .filter(Boolean)
        .join(' '),
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
  return reports.some((r) => r.checks.some((c) => failsRun(c, strict))) ? 1 : 0;
}

async function* prepend<T>(first: IteratorResult<T>, rest: AsyncIterator<T>): AsyncGenerator<T> {
  if (first.done) return;
  yield first.value;
  for (let r = await rest.next(); !r.done; r = await rest.next()) yield r.value;
}

function replayDescription(report: ScenarioReport, plan: RunPlan): string {
  const s = report.summary;
  const keys = s.keyClasses.reduce((n, c) => n + c.keys, 0);
  const through = report.instances.some((i) => i.name !== null)
    ? `${report.instances.length} instances from the log's instance column`
    : `${plan.scenario.instances} instances behind ${plan.scenario.balancer.kind}`;
  return `Replay of ${plan.traffic!.file}: ${s.requests} requests from ${keys} keys over ${(s.durationMs / 1000).toFixed(1)} s, through ${through}, under ${plan.deployment.label}.`;
}

/** The runs of each what-if, grouped by the scenario (or log) they vary. */
function fleetReports(reports: readonly ScenarioReport[]): FleetReport[] {
  const byBase = new Map<string, FleetPoint[]>();
  for (const r of reports) {
    if (!r.fleet) continue;
    const points = byBase.get(r.fleet.base) ?? [];
    points.push({
      instances: r.fleet.instances,
      maxFraction: r.fleet.maxFraction,
      driftPct: r.summary.driftPct,
      worstDriftPct: r.summary.worstDrift?.pct ?? null,
      callsPerDecision: r.summary.callsPerDecision,
      roundTripsPerDecision: r.summary.roundTripsPerDecision,
    });
    byBase.set(r.fleet.base, points);
  }
  return [...byBase].map(([scenario, points]) => ({ scenario, points }));
}
