import fc from 'fast-check';
import type { PolicyConfig } from '../src/index.js';
import type { BalancerConfig, Demand, ScaleEvent, ScenarioInput, Traffic } from './scenario.js';
import { tailScenario } from './suite.js';

/**
 * Scenarios as fast-check arbitraries: short runs (a few virtual seconds) over the whole space the
 * simulator models, so a property test can run dozens of them in seconds and shrink a failure to a
 * small scenario. Every value is plain JSON, ready for `--replay`.
 */

export const policyArb: fc.Arbitrary<PolicyConfig> = fc
  .record({
    rate: fc.constantFrom(10, 50, 100),
    burstFactor: fc.constantFrom(0.5, 1, 2),
    lease: fc.oneof(
      { weight: 4, arbitrary: fc.constant(undefined) },
      { weight: 1, arbitrary: fc.constant('exact' as const) },
      {
        weight: 2,
        arbitrary: fc.record(
          {
            maxFraction: fc.constantFrom(0.05, 0.1, 0.2, 0.3),
            ttl: fc.constantFrom('250ms', '1s', '2s', '5s'),
            horizon: fc.constantFrom('100ms', '500ms', '2s'),
          },
          { requiredKeys: [] },
        ),
      },
    ),
  })
  .map(({ rate, burstFactor, lease }) => {
    const policy: PolicyConfig = { algorithm: 'token-bucket', rate, period: '1s', burst: rate * burstFactor };
    if (lease !== undefined) policy.lease = lease;
    return policy;
  });

const load = (max: number) =>
  fc.double({ min: 0.05, max, noNaN: true }).map((x) => Math.round(x * 100) / 100);

export const demandArb = (durationMs: number, maxLoad: number): fc.Arbitrary<Demand> =>
  fc.oneof(
    load(maxLoad).map((l): Demand => ({ shape: 'steady', load: l })),
    fc
      .record({ from: load(maxLoad), to: load(maxLoad), at: fc.double({ min: 0.1, max: 0.9, noNaN: true }) })
      .map((d): Demand => ({ shape: 'step', from: d.from, to: d.to, atMs: Math.round(d.at * durationMs) })),
    fc
      .record({
        low: load(maxLoad),
        high: load(maxLoad),
        periodMs: fc.integer({ min: 200, max: durationMs }),
      })
      .map((d): Demand => ({ shape: 'saw', ...d })),
  );

export const balancerArb: fc.Arbitrary<BalancerConfig> = fc.oneof(
  fc.constant({ kind: 'round-robin' as const }),
  fc.constant({ kind: 'random' as const }),
  fc.constant({ kind: 'sticky' as const }),
  fc
    .double({ min: 0, max: 2, noNaN: true })
    .map((s) => ({ kind: 'zipf' as const, s: Math.round(s * 10) / 10 })),
  fc
    .array(fc.integer({ min: 1, max: 10 }), { minLength: 1, maxLength: 5 })
    .map((weights) => ({ kind: 'weighted' as const, weights })),
);

const autoscaleArb = (durationMs: number, maxInstances: number): fc.Arbitrary<ScaleEvent[]> =>
  fc.uniqueArray(fc.integer({ min: 1, max: durationMs - 1 }), { maxLength: 3 }).chain((times) =>
    fc.tuple(
      ...[...times]
        .sort((a, b) => a - b)
        .map((atMs) =>
          fc.record({
            atMs: fc.constant(atMs),
            instances: fc.integer({ min: 1, max: maxInstances }),
            leave: fc.constantFrom('close' as const, 'crash' as const),
          }),
        ),
    ),
  );

const trafficArb = (durationMs: number, maxLoad: number): fc.Arbitrary<Traffic> =>
  fc
    .record({
      demand: demandArb(durationMs, maxLoad),
      keys: fc.record({
        count: fc.integer({ min: 1, max: 20 }),
        zipf: fc.constantFrom(0, 0.5, 1, 1.5),
      }),
      costs: fc.oneof(
        { weight: 3, arbitrary: fc.constant<Traffic['costs']>([{ cost: 1, weight: 1 }]) },
        {
          weight: 1,
          arbitrary: fc.array(
            fc.record({ cost: fc.constantFrom(1, 2, 5, 10), weight: fc.integer({ min: 1, max: 10 }) }),
            { minLength: 1, maxLength: 3 },
          ),
        },
      ),
      retry: fc.option(
        fc.record({
          honourRetryAfter: fc.boolean(),
          maxRetries: fc.integer({ min: 0, max: 4 }),
          backoffMs: fc.integer({ min: 5, max: 200 }),
        }),
        { nil: undefined },
      ),
    })
    .map(({ retry, ...rest }) => (retry === undefined ? rest : { ...rest, retry }));

export interface ScenarioArbOptions {
  /** @default 12 */
  maxInstances?: number;
  /** Longest run, in virtual ms. @default 3000 */
  maxDurationMs?: number;
  /** Highest demand, in multiples of the limit. @default 6 */
  maxLoad?: number;
}

/** Random short scenarios. */
export function scenarioArb(options: ScenarioArbOptions = {}): fc.Arbitrary<ScenarioInput> {
  const maxInstances = options.maxInstances ?? 12;
  const maxLoad = options.maxLoad ?? 6;
  return fc.integer({ min: 1000, max: options.maxDurationMs ?? 3000 }).chain((durationMs) =>
    fc.record({
      name: fc.constant('property'),
      durationMs: fc.constant(durationMs),
      seed: fc.integer({ min: 0, max: 2 ** 31 - 1 }),
      policy: policyArb,
      instances: fc.integer({ min: 1, max: maxInstances }),
      autoscale: autoscaleArb(durationMs, maxInstances),
      balancer: balancerArb,
      latency: fc.record({
        meanMs: fc.constantFrom(0, 0.1, 0.3, 1, 2),
        jitter: fc.constantFrom(0, 0.5, 1),
      }),
      traffic: trafficArb(durationMs, maxLoad),
    }),
  );
}

/**
 * Small long-tail scenarios (issue 11), shaped like the default suite's `tail-*` ones: Zipf(1) keys,
 * each limited to 10 or 100 per second with burst = rate, the hottest offered 10× its limit, scaling
 * with clean exits or crashes. A few virtual seconds and at most ~10k decisions each.
 */
export function tailScenarioArb(): fc.Arbitrary<ScenarioInput> {
  return fc
    .record({
      rate: fc.constantFrom(10, 100),
      keys: fc.integer({ min: 100, max: 2000 }),
      balancer: fc.constantFrom<BalancerConfig>({ kind: 'round-robin' }, { kind: 'zipf', s: 1 }),
      durationMs: fc.integer({ min: 1000, max: 3000 }),
      leave: fc.constantFrom('close' as const, 'crash' as const),
      seed: fc.integer({ min: 0, max: 2 ** 31 - 1 }),
      instances: fc.integer({ min: 2, max: 12 }),
      latencyMs: fc.constantFrom(0, 0.3, 1),
    })
    .map(({ seed, instances, latencyMs, ...shape }) => ({
      ...tailScenario({
        ...shape,
        // 100/s keys cost ten times the decisions: fewer of them keeps each run small.
        keys: shape.rate === 100 ? Math.ceil(shape.keys / 8) : shape.keys,
        instances: [Math.ceil(instances / 2), instances, Math.ceil(instances / 1.5)],
      }),
      seed,
      latency: { meanMs: latencyMs, jitter: 0.5 },
    }));
}
