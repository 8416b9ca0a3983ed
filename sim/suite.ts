import type { PolicyConfig } from '../src/index.js';
import type { BalancerConfig, ScaleEvent, ScenarioInput } from './scenario.js';

/** Policies `--policy` accepts by name. */
export const POLICIES: Record<string, PolicyConfig> = {
  /** A per-API-key limit: 100 req/s, burst 100. */
  'per-second': { algorithm: 'token-bucket', rate: 100, period: '1s', burst: 100 },
  /** An upstream provider's limit: 100 requests per minute. */
  'per-minute': { algorithm: 'token-bucket', rate: 100, period: '1m', burst: 100 },
  /** The per-second policy with one store call per decision: the baseline leasing is measured against. */
  'per-second-exact': { algorithm: 'token-bucket', rate: 100, period: '1s', burst: 100, lease: 'exact' },
};

const perSecond = POLICIES['per-second']!;
/** The acceptance bound for every scenario at 20 instances. */
const DRIFT = { maxAbsDriftPct: 2, goalAbsDriftPct: 0.5 };
/**
 * The scenarios whose cumulative drift leaves, or with another seed may leave, the ±2 % band during
 * the run (after the warm-up) though it ends inside it: mostly while leases held at the instances
 * are a large share of what the exact limiter has admitted so far, and at crash-6x's crash.
 * Reported, not failing (the worst drift fails the run for every other scenario); --strict fails
 * them.
 */
const WORST_DRIFT = 'open work: the drift over the run (issue 11: every scenario within 2 %)';
/** 5 → 20 → 8 instances. */
const SCALING = (leave: ScaleEvent['leave']): ScaleEvent[] => [
  { atMs: 15_000, instances: 20, leave },
  { atMs: 40_000, instances: 8, leave },
];

/** Sum of 1/i^s for i = 1..n: the Zipf normaliser. */
function harmonic(n: number, s: number): number {
  let sum = 0;
  for (let i = 1; i <= n; i++) sum += 1 / i ** s;
  return sum;
}

export interface TailShape {
  keys: number;
  /** Per-key limit in requests per second (burst = rate). */
  rate: number;
  balancer: BalancerConfig;
  durationMs: number;
  leave: ScaleEvent['leave'];
  /** Instances at the start, after a third of the run and after two thirds. @default [10, 20, 12] */
  instances?: readonly [number, number, number];
}

/** How many times its limit the hottest key is offered; with Zipf(1) keys the next ones follow 1/rank. */
export const TAIL_HEAD_LOAD = 10;

/**
 * A long-tail scenario (issue 11): `keys` API keys with Zipf(1) popularity, each limited to `rate`/s
 * with burst = rate. The hottest key is offered 10× its limit, so the 9 hottest keys are over it and
 * every other key is below it; autoscaling (by default 10 → 20 → 12 instances).
 */
export function tailScenario(shape: TailShape): ScenarioInput {
  const { keys, rate, balancer, durationMs, leave } = shape;
  const [start, peak, end] = shape.instances ?? [10, 20, 12];
  const load = Math.round(TAIL_HEAD_LOAD * harmonic(keys, 1));
  const below = 100 * (1 - harmonic(TAIL_HEAD_LOAD - 1, 1) / harmonic(keys, 1));
  const balancerText =
    balancer.kind === 'round-robin'
      ? 'round-robin'
      : `Zipf balancing (s = ${balancer.kind === 'zipf' ? balancer.s : '?'})`;
  const count = keys >= 1000 ? `${keys / 1000}k` : String(keys);
  return {
    name: `tail-${count}-${rate}rps-${balancer.kind === 'round-robin' ? 'rr' : balancer.kind}${leave === 'crash' ? '-crash' : ''}`,
    description:
      `Long tail: ${keys} keys with Zipf(1) popularity at {limit} each, ${load}× one key's limit in all; ` +
      `the hottest key is offered ${TAIL_HEAD_LOAD}× its limit, the 9 hottest are over it, ` +
      `${below.toFixed(0)} % of requests go to keys below it. ${balancerText}, autoscaling ${start} → ${peak} → ${end}` +
      `${leave === 'crash' ? ' where leaving instances crash' : ''}.`,
    policy: { algorithm: 'token-bucket', rate, period: '1s', burst: rate },
    durationMs,
    instances: start,
    autoscale: [
      { atMs: durationMs / 3, instances: peak, leave },
      { atMs: (2 * durationMs) / 3, instances: end, leave },
    ],
    balancer,
    traffic: { demand: { shape: 'steady', load }, keys: { count: keys, zipf: 1 } },
    expect: { maxAbsDriftPct: 1, maxDeniedBelowLimitPct: 0.5 },
  };
}

const RR: BalancerConfig = { kind: 'round-robin' };
const ZIPF: BalancerConfig = { kind: 'zipf', s: 1 };

/**
 * Issue 11's accuracy cases: 1k–100k keys, 10/100/1000 per second, round-robin and skewed
 * balancing, scaling with clean exits and with crashes. About 600k decisions in all (≈ 10 s).
 */
export const TAIL_SUITE: ScenarioInput[] = [
  tailScenario({ keys: 1000, rate: 10, balancer: RR, durationMs: 30_000, leave: 'close' }),
  tailScenario({ keys: 1000, rate: 1000, balancer: ZIPF, durationMs: 3000, leave: 'close' }),
  tailScenario({ keys: 10_000, rate: 100, balancer: RR, durationMs: 10_000, leave: 'close' }),
  tailScenario({ keys: 10_000, rate: 100, balancer: ZIPF, durationMs: 10_000, leave: 'crash' }),
  tailScenario({ keys: 100_000, rate: 10, balancer: ZIPF, durationMs: 30_000, leave: 'close' }),
  tailScenario({ keys: 100_000, rate: 100, balancer: RR, durationMs: 10_000, leave: 'close' }),
];

/**
 * The default suite `npm run sim` runs: the per-API-key case at three loads (the core's acceptance
 * numbers), then one scenario per traffic shape, balancer and scaling mode.
 */
export const SUITE: ScenarioInput[] = [
  {
    name: 'one-key-6x',
    description:
      'One API key at {limit}, demand 6× the limit for 60 s; Zipf balancing, autoscaling 5 → 20 → 8.',
    policy: perSecond,
    durationMs: 60_000,
    instances: 5,
    autoscale: SCALING('close'),
    traffic: { demand: { shape: 'steady', load: 6 } },
    expect: { ...DRIFT, maxCallsPerDecision: 0.1 },
  },
  {
    name: 'one-key-1.05x',
    description: 'The same at demand 1.05× the limit: the bucket is almost never empty for long.',
    policy: perSecond,
    durationMs: 60_000,
    instances: 5,
    autoscale: SCALING('close'),
    traffic: { demand: { shape: 'steady', load: 1.05 } },
    expect: DRIFT,
  },
  {
    name: 'one-key-0.8x',
    description: 'The same at 0.8× the limit: (almost) everything must pass.',
    policy: perSecond,
    durationMs: 60_000,
    instances: 5,
    autoscale: SCALING('close'),
    traffic: { demand: { shape: 'steady', load: 0.8 } },
    expect: { ...DRIFT, minAdmittedPct: 99 },
  },
  {
    name: 'crash-6x',
    description: 'Autoscaling 5 → 20 → 8 where leaving instances crash: their leased tokens are lost.',
    policy: perSecond,
    durationMs: 60_000,
    instances: 5,
    autoscale: SCALING('crash'),
    traffic: { demand: { shape: 'steady', load: 6 } },
    expect: { ...DRIFT, worstDriftPending: WORST_DRIFT, maxCallsPerDecision: 0.1 },
  },
  {
    name: 'steady-2x',
    description: '20 instances behind round-robin, steady demand at twice the limit.',
    policy: perSecond,
    durationMs: 30_000,
    balancer: { kind: 'round-robin' },
    traffic: { demand: { shape: 'steady', load: 2 } },
    // Its quiet instances decide exactly while the bucket is oversubscribed: within -0.3 % over
    // the run for seeds 1-5 (docs/accuracy.md).
    expect: DRIFT,
  },
  {
    name: 'per-minute-6x',
    description: "An upstream provider's limit ({limit}) with demand 6× it, for 10 minutes.",
    policy: POLICIES['per-minute']!,
    durationMs: 600_000,
    balancer: { kind: 'round-robin' },
    traffic: { demand: { shape: 'steady', load: 6 } },
    expect: { ...DRIFT, worstDriftPending: WORST_DRIFT },
  },
  {
    name: 'near-limit',
    description: 'Demand exactly at the limit, instances picked at random.',
    policy: perSecond,
    durationMs: 30_000,
    balancer: { kind: 'random' },
    traffic: { demand: { shape: 'steady', load: 1 } },
    expect: DRIFT,
  },
  {
    name: 'under-limit',
    description: 'Half the limit, one instance taking five times the share of each other one.',
    policy: perSecond,
    durationMs: 30_000,
    balancer: { kind: 'weighted', weights: [5, ...Array<number>(19).fill(1)] },
    traffic: { demand: { shape: 'steady', load: 0.5 } },
    expect: { ...DRIFT, minAdmittedPct: 99 },
  },
  {
    name: 'saw',
    description: 'Demand ramps from 0.2× to 3× the limit every 10 s, steep Zipf balancing (s = 1.5).',
    policy: perSecond,
    durationMs: 30_000,
    balancer: { kind: 'zipf', s: 1.5 },
    traffic: { demand: { shape: 'saw', low: 0.2, high: 3, periodMs: 10_000 } },
    expect: { ...DRIFT, worstDriftPending: WORST_DRIFT },
  },
  {
    name: 'step',
    description: 'Demand steps from 0.5× to 4× the limit at 15 s.',
    policy: perSecond,
    durationMs: 30_000,
    traffic: { demand: { shape: 'step', from: 0.5, to: 4, atMs: 15_000 } },
    expect: DRIFT,
  },
  {
    name: 'retry-honour',
    description: 'Fresh demand at 2× the limit; denied clients retry after Retry-After (up to 5 times).',
    policy: perSecond,
    durationMs: 30_000,
    traffic: {
      demand: { shape: 'steady', load: 2 },
      retry: { honourRetryAfter: true, maxRetries: 5, backoffMs: 20 },
    },
    expect: { ...DRIFT, worstDriftPending: WORST_DRIFT },
  },
  {
    name: 'retry-ignore',
    description:
      'Fresh demand at 2× the limit; denied clients ignore Retry-After and retry within 20 ms (up to 10 times).',
    policy: perSecond,
    durationMs: 30_000,
    traffic: {
      demand: { shape: 'steady', load: 2 },
      retry: { honourRetryAfter: false, maxRetries: 10, backoffMs: 20 },
    },
    expect: { ...DRIFT, worstDriftPending: WORST_DRIFT },
  },
  {
    name: 'many-keys',
    description:
      '1000 keys with Zipf popularity (s = 1.1), total demand 10× one key’s limit, random balancing.',
    policy: perSecond,
    durationMs: 30_000,
    balancer: { kind: 'random' },
    traffic: { demand: { shape: 'steady', load: 10 }, keys: { count: 1000, zipf: 1.1 } },
    expect: DRIFT,
  },
  {
    name: 'sticky-keys',
    description: '200 keys (Zipf s = 1) pinned to instances by consistent hashing, total demand 10×.',
    policy: perSecond,
    durationMs: 30_000,
    balancer: { kind: 'sticky' },
    traffic: { demand: { shape: 'steady', load: 10 }, keys: { count: 200, zipf: 1 } },
    expect: DRIFT,
  },
  {
    name: 'weighted-costs',
    description: 'Requests costing 1, 5 or 20 tokens (70/25/5 %), demand 3× the limit in tokens.',
    policy: perSecond,
    durationMs: 60_000,
    traffic: {
      demand: { shape: 'steady', load: 3 },
      costs: [
        { cost: 1, weight: 70 },
        { cost: 5, weight: 25 },
        { cost: 20, weight: 5 },
      ],
    },
    expect: { ...DRIFT, worstDriftPending: WORST_DRIFT },
  },
  {
    name: 'exact-6x',
    description:
      "Baseline: the one-key-6x case with lease: 'exact' (one store call per decision that is not cached).",
    policy: POLICIES['per-second-exact']!,
    durationMs: 30_000,
    traffic: { demand: { shape: 'steady', load: 6 } },
    expect: { maxAbsDriftPct: 0 },
  },
  {
    name: 'small-limits-1k',
    description:
      'Small limits over many keys, as a new user first tried it: 1000 keys (Zipf s = 1) at {limit} each, 1000× one key’s limit in all for 10 s, 20 instances, Zipf balancing.',
    policy: { algorithm: 'token-bucket', rate: 10, period: '1s', burst: 10 },
    durationMs: 10_000,
    traffic: { demand: { shape: 'steady', load: 1000 }, keys: { count: 1000, zipf: 1 } },
    expect: DRIFT,
  },
  ...TAIL_SUITE,
];
