import { ConfigError, type PolicyConfig } from '../src/index.js';
import type { LatencyModel } from './latencyStore.js';
import { policyLabel, policyModel } from './policies.js';

/**
 * A scenario: one policy, a cluster of gateway instances behind a load balancer, and the traffic
 * they see. Plain JSON (times in ms), so a scenario found by the property test can be printed and
 * replayed with `npm run sim -- --replay '<json>'`.
 */
export interface Scenario {
  name: string;
  description: string;
  /** Any policy the library accepts; the reference is the same policy in exact mode. */
  policy: PolicyConfig;
  durationMs: number;
  seed: number;
  /** Instances at time 0. */
  instances: number;
  /** Instance-count changes over time, in time order. */
  autoscale: ScaleEvent[];
  balancer: BalancerConfig;
  /** Round trip to the shared store. */
  latency: LatencyModel;
  traffic: Traffic;
  /** Targets the report checks (the default suite's acceptance numbers). */
  expect: Expectations;
  /**
   * Set when the targets belong to open work (e.g. 'issue 11'): a missed target is reported, but
   * only fails the run under `--strict`. Bounds the design guarantees (the envelope) always fail it.
   */
  pending?: string;
  /** Set on a `--traffic` run: the log replayed (the traffic fields then do not apply). */
  replayOf?: string;
}

export interface ScaleEvent {
  atMs: number;
  instances: number;
  /** How instances that leave go: `close()` hands their leases back, a crash loses them. */
  leave: 'close' | 'crash';
}

export type BalancerConfig =
  | { kind: 'round-robin' }
  | { kind: 'random' }
  /** Instance of rank i (0-based, in order of joining) gets weight 1 / (i+1)^s. */
  | { kind: 'zipf'; s: number }
  /** Instance i gets weights[i % weights.length]. */
  | { kind: 'weighted'; weights: number[] }
  /** Consistent hashing of the key onto the live instances. */
  | { kind: 'sticky' };

/**
 * Offered demand in multiples of the policy's sustained limit (tokens, summed over all keys):
 * 6 means six times what one key may pass.
 */
export type Demand =
  | { shape: 'steady'; load: number }
  | { shape: 'step'; from: number; to: number; atMs: number }
  /** Rises linearly from `low` to `high` over each period, then drops back. */
  | { shape: 'saw'; low: number; high: number; periodMs: number };

export interface Traffic {
  demand: Demand;
  /** Keys drawn with Zipf popularity (`zipf: 0` = uniform). */
  keys: { count: number; zipf: number };
  /** Request costs and their relative frequencies. */
  costs: { cost: number; weight: number }[];
  /** Clients that retry a 429, either after its Retry-After or after their own short backoff. */
  retry?: { honourRetryAfter: boolean; maxRetries: number; backoffMs: number };
}

export interface Expectations {
  /**
   * Largest |drift| in % of the exact limiter's admitted tokens: at the end of the run, and the
   * worst over the run after its warm-up (`WARM_UP_FRACTION` in report.ts).
   */
  maxAbsDriftPct?: number;
  /**
   * The open work the worst-drift target belongs to, where the scenario is known to miss it: the
   * miss is reported and fails the run only with `--strict` (the final drift still fails it).
   */
  worstDriftPending?: string;
  /** Where |drift| should get to: shown next to the drift check, not checked. */
  goalAbsDriftPct?: number;
  /**
   * Largest share of decisions (%) the cluster may deny while the exact limiter admitted the same
   * request with at least 10 % of the limit left.
   */
  maxDeniedBelowLimitPct?: number;
  maxCallsPerDecision?: number;
  /** Smallest share of requests (%) the cluster must admit. */
  minAdmittedPct?: number;
}

/** What a scenario may leave out. */
export type ScenarioInput = Pick<Scenario, 'name' | 'policy' | 'durationMs'> &
  Partial<Omit<Scenario, 'traffic' | 'name' | 'policy' | 'durationMs'>> & {
    traffic: Pick<Traffic, 'demand'> & Partial<Traffic>;
  };

export const DEFAULTS = {
  seed: 1,
  instances: 20,
  balancer: { kind: 'zipf', s: 1 } as BalancerConfig,
  latency: { meanMs: 0.3, jitter: 0.5 },
  keys: { count: 1, zipf: 1 },
  costs: [{ cost: 1, weight: 1 }],
};

export const MAX_INSTANCES = 1000;
/** Keeps a mistyped scenario from running for hours: about 20 s of CPU per million decisions. */
export const MAX_REQUESTS = 5_000_000;

type Obj = Record<string, unknown>;

/** An object; with `known`, one whose every field is among them (a misspelt field is not ignored). */
function object(value: unknown, field: string, known?: readonly string[]): Obj {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new ConfigError(field, `expected an object, got ${describe(value)}`);
  }
  const unknown = known && Object.keys(value).find((k) => !known.includes(k));
  if (unknown !== undefined) {
    throw new ConfigError(`${field}.${unknown}`, `not a field here; expected one of ${known!.join(', ')}`);
  }
  return value as Obj;
}

function describe(value: unknown): string {
  if (Array.isArray(value)) return 'an array';
  if (value === null) return 'null';
  if (value === undefined) return 'nothing (the field is missing)';
  return typeof value === 'string' ? JSON.stringify(value) : `${typeof value} ${String(value)}`;
}

function number(
  value: unknown,
  field: string,
  range: { min?: number; max?: number; above?: number },
): number {
  const { min, max, above } = range;
  if (
    typeof value !== 'number' ||
    !Number.isFinite(value) ||
    (min !== undefined && value < min) ||
    (above !== undefined && value <= above) ||
    (max !== undefined && value > max)
  ) {
    const lower = above !== undefined ? `above ${above}` : min !== undefined ? `from ${min}` : '';
    const upper = max !== undefined ? ` up to ${max}` : '';
    throw new ConfigError(field, `expected a finite number ${lower}${upper}, got ${describe(value)}`);
  }
  return value;
}

function integer(value: unknown, field: string, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new ConfigError(field, `expected an integer from ${min} to ${max}, got ${describe(value)}`);
  }
  return value;
}

function oneOf<T extends string>(value: unknown, field: string, options: readonly T[]): T {
  if (typeof value !== 'string' || !options.includes(value as T)) {
    throw new ConfigError(
      field,
      `expected one of ${options.map((o) => `'${o}'`).join(', ')}, got ${describe(value)}`,
    );
  }
  return value as T;
}

function balancer(raw: unknown, field: string): BalancerConfig {
  const b = object(raw, field, ['kind', 's', 'weights']);
  const kind = oneOf(b.kind, `${field}.kind`, [
    'round-robin',
    'random',
    'zipf',
    'weighted',
    'sticky',
  ] as const);
  switch (kind) {
    case 'zipf':
      return { kind, s: number(b.s, `${field}.s`, { min: 0, max: 10 }) };
    case 'weighted': {
      if (!Array.isArray(b.weights) || b.weights.length === 0) {
        throw new ConfigError(
          `${field}.weights`,
          `expected a non-empty array of weights, got ${describe(b.weights)}`,
        );
      }
      return { kind, weights: b.weights.map((w, i) => number(w, `${field}.weights[${i}]`, { above: 0 })) };
    }
    default:
      return { kind };
  }
}

function demand(raw: unknown, field: string, durationMs: number): Demand {
  const d = object(raw, field, ['shape', 'load', 'from', 'to', 'atMs', 'low', 'high', 'periodMs']);
  const shape = oneOf(d.shape, `${field}.shape`, ['steady', 'step', 'saw'] as const);
  const load = (v: unknown, f: string) => number(v, `${field}.${f}`, { min: 0, max: 1000 });
  let parsed: Demand;
  switch (shape) {
    case 'steady':
      parsed = { shape, load: load(d.load, 'load') };
      break;
    case 'step':
      parsed = {
        shape,
        from: load(d.from, 'from'),
        to: load(d.to, 'to'),
        atMs: number(d.atMs, `${field}.atMs`, { min: 0, max: durationMs }),
      };
      break;
    case 'saw':
      parsed = {
        shape,
        low: load(d.low, 'low'),
        high: load(d.high, 'high'),
        periodMs: number(d.periodMs, `${field}.periodMs`, { above: 0 }),
      };
      break;
  }
  if (peakLoad(parsed) <= 0) throw new ConfigError(field, 'expected some demand (every load is 0)');
  return parsed;
}

/** The highest load a demand shape reaches. */
export function peakLoad(d: Demand): number {
  switch (d.shape) {
    case 'steady':
      return d.load;
    case 'step':
      return Math.max(d.from, d.to);
    case 'saw':
      return Math.max(d.low, d.high);
  }
}

/** Load at time `t` (ms). */
export function loadAt(d: Demand, t: number): number {
  switch (d.shape) {
    case 'steady':
      return d.load;
    case 'step':
      return t < d.atMs ? d.from : d.to;
    case 'saw':
      return d.low + ((d.high - d.low) * (t % d.periodMs)) / d.periodMs;
  }
}

function traffic(raw: unknown, field: string, durationMs: number): Traffic {
  const t = object(raw, field, ['demand', 'keys', 'costs', 'retry']);
  const keys = t.keys === undefined ? DEFAULTS.keys : object(t.keys, `${field}.keys`, ['count', 'zipf']);
  const costs = t.costs ?? DEFAULTS.costs;
  if (!Array.isArray(costs) || costs.length === 0 || costs.length > 100) {
    throw new ConfigError(
      `${field}.costs`,
      `expected 1 to 100 { cost, weight } entries, got ${describe(costs)}`,
    );
  }
  const parsed: Traffic = {
    demand: demand(t.demand, `${field}.demand`, durationMs),
    keys: {
      count: integer(keys.count, `${field}.keys.count`, 1, 1_000_000),
      zipf: number(keys.zipf, `${field}.keys.zipf`, { min: 0, max: 10 }),
    },
    costs: costs.map((c, i) => {
      const o = object(c, `${field}.costs[${i}]`, ['cost', 'weight']);
      return {
        cost: number(o.cost, `${field}.costs[${i}].cost`, { above: 0 }),
        weight: number(o.weight, `${field}.costs[${i}].weight`, { above: 0 }),
      };
    }),
  };
  if (t.retry !== undefined) {
    const r = object(t.retry, `${field}.retry`, ['honourRetryAfter', 'maxRetries', 'backoffMs']);
    if (typeof r.honourRetryAfter !== 'boolean') {
      throw new ConfigError(
        `${field}.retry.honourRetryAfter`,
        `expected a boolean, got ${describe(r.honourRetryAfter)}`,
      );
    }
    parsed.retry = {
      honourRetryAfter: r.honourRetryAfter,
      maxRetries: integer(r.maxRetries, `${field}.retry.maxRetries`, 0, 100),
      backoffMs: number(r.backoffMs, `${field}.retry.backoffMs`, { above: 0 }),
    };
  }
  return parsed;
}

function autoscale(raw: unknown, field: string, durationMs: number): ScaleEvent[] {
  if (raw === undefined) return [];
  if (!Array.isArray(raw))
    throw new ConfigError(field, `expected an array of scale events, got ${describe(raw)}`);
  let last = -1;
  return raw.map((e, i) => {
    const o = object(e, `${field}[${i}]`, ['atMs', 'instances', 'leave']);
    const atMs = number(o.atMs, `${field}[${i}].atMs`, { min: 0, max: durationMs });
    if (atMs <= last)
      throw new ConfigError(`${field}[${i}].atMs`, 'expected scale events in increasing time order');
    last = atMs;
    return {
      atMs,
      instances: integer(o.instances, `${field}[${i}].instances`, 1, MAX_INSTANCES),
      leave:
        o.leave === undefined ? 'close' : oneOf(o.leave, `${field}[${i}].leave`, ['close', 'crash'] as const),
    };
  });
}

function expectations(raw: unknown, field: string): Expectations {
  if (raw === undefined) return {};
  const e = object(raw, field, [
    'maxAbsDriftPct',
    'worstDriftPending',
    'goalAbsDriftPct',
    'maxDeniedBelowLimitPct',
    'maxCallsPerDecision',
    'minAdmittedPct',
  ]);
  const out: Expectations = {};
  if (e.maxAbsDriftPct !== undefined)
    out.maxAbsDriftPct = number(e.maxAbsDriftPct, `${field}.maxAbsDriftPct`, { min: 0 });
  if (e.worstDriftPending !== undefined) {
    if (typeof e.worstDriftPending !== 'string' || e.worstDriftPending.length === 0) {
      throw new ConfigError(
        `${field}.worstDriftPending`,
        `expected a non-empty string, got ${describe(e.worstDriftPending)}`,
      );
    }
    out.worstDriftPending = e.worstDriftPending;
  }
  if (e.goalAbsDriftPct !== undefined)
    out.goalAbsDriftPct = number(e.goalAbsDriftPct, `${field}.goalAbsDriftPct`, { min: 0 });
  if (e.maxDeniedBelowLimitPct !== undefined) {
    out.maxDeniedBelowLimitPct = number(e.maxDeniedBelowLimitPct, `${field}.maxDeniedBelowLimitPct`, {
      min: 0,
      max: 100,
    });
  }
  if (e.maxCallsPerDecision !== undefined) {
    out.maxCallsPerDecision = number(e.maxCallsPerDecision, `${field}.maxCallsPerDecision`, { min: 0 });
  }
  if (e.minAdmittedPct !== undefined) {
    out.minAdmittedPct = number(e.minAdmittedPct, `${field}.minAdmittedPct`, { min: 0, max: 100 });
  }
  return out;
}

/** Mean tokens per request. */
export function meanCost(t: Traffic): number {
  let sum = 0;
  let weight = 0;
  for (const c of t.costs) {
    sum += c.cost * c.weight;
    weight += c.weight;
  }
  return sum / weight;
}

/**
 * Validates a scenario and fills in the defaults. Every problem is a `ConfigError` naming the field
 * (`scenario.traffic.demand.load`, `scenario.policy.rate`, ...), never a crash later in the run.
 */
export function parseScenario(raw: unknown, field = 'scenario'): Scenario {
  const s = object(raw, field, [
    'name',
    'description',
    'policy',
    'durationMs',
    'seed',
    'instances',
    'autoscale',
    'balancer',
    'latency',
    'traffic',
    'expect',
    'pending',
    'replayOf',
  ]);
  if (typeof s.name !== 'string' || s.name.length === 0 || s.name.length > 100) {
    throw new ConfigError(`${field}.name`, `expected a name of 1 to 100 characters, got ${describe(s.name)}`);
  }
  const durationMs = number(s.durationMs, `${field}.durationMs`, { above: 0, max: 7 * 86_400_000 });
  const model = policyModel(s.policy, `${field}.policy`);
  const latency =
    s.latency === undefined ? DEFAULTS.latency : object(s.latency, `${field}.latency`, ['meanMs', 'jitter']);
  const scenario: Scenario = {
    name: s.name,
    // `{limit}` in a description names the scenario's policy, whatever policy it runs.
    description:
      s.description === undefined
        ? ''
        : String(s.description).replaceAll('{limit}', policyLabel(s.policy as PolicyConfig)),
    policy: s.policy as PolicyConfig,
    durationMs,
    seed: s.seed === undefined ? DEFAULTS.seed : integer(s.seed, `${field}.seed`, 0, 2 ** 32 - 1),
    instances:
      s.instances === undefined
        ? DEFAULTS.instances
        : integer(s.instances, `${field}.instances`, 1, MAX_INSTANCES),
    autoscale: autoscale(s.autoscale, `${field}.autoscale`, durationMs),
    balancer: s.balancer === undefined ? DEFAULTS.balancer : balancer(s.balancer, `${field}.balancer`),
    latency: {
      meanMs: number(latency.meanMs, `${field}.latency.meanMs`, { min: 0, max: 10_000 }),
      jitter: number(latency.jitter, `${field}.latency.jitter`, { min: 0, max: 1 }),
    },
    traffic: traffic(s.traffic, `${field}.traffic`, durationMs),
    expect: expectations(s.expect, `${field}.expect`),
  };
  if (s.pending !== undefined) {
    if (typeof s.pending !== 'string' || s.pending.length === 0) {
      throw new ConfigError(`${field}.pending`, `expected a non-empty string, got ${describe(s.pending)}`);
    }
    scenario.pending = s.pending;
  }
  const requests =
    (peakLoad(scenario.traffic.demand) * model.ratePerMs * durationMs) / meanCost(scenario.traffic);
  if (requests > MAX_REQUESTS) {
    throw new ConfigError(
      `${field}.durationMs`,
      `about ${Math.round(requests)} requests at peak load; keep it under ${MAX_REQUESTS} (shorten the duration or lower the load)`,
    );
  }
  return scenario;
}
