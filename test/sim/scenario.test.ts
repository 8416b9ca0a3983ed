import { describe, expect, it } from 'vitest';
import { parseScenario, type ScenarioInput } from '../../sim/scenario.js';
import { SUITE } from '../../sim/suite.js';
import { ConfigError } from '../../src/index.js';

const base: ScenarioInput = {
  name: 'base',
  policy: { algorithm: 'token-bucket', rate: 100, burst: 100 },
  durationMs: 1000,
  traffic: { demand: { shape: 'steady', load: 1 } },
};

function fieldOf(raw: unknown): string | undefined {
  try {
    parseScenario(raw);
  } catch (err) {
    expect(err, 'a typed ConfigError').toBeInstanceOf(ConfigError);
    return (err as ConfigError).field;
  }
  return undefined;
}

describe('scenario validation', () => {
  it('accepts every scenario of the default suite and fills in the defaults', () => {
    for (const input of SUITE) expect(() => parseScenario(input), input.name).not.toThrow();
    const s = parseScenario(base);
    expect(s).toMatchObject({ seed: 1, instances: 20, autoscale: [], balancer: { kind: 'zipf', s: 1 } });
    expect(s.traffic).toMatchObject({ keys: { count: 1 }, costs: [{ cost: 1, weight: 1 }] });
  });

  it.each([
    ['scenario', 42],
    ['scenario.name', { ...base, name: '' }],
    ['scenario.durationMs', { ...base, durationMs: -1 }],
    ['scenario.policy.rate', { ...base, policy: { algorithm: 'token-bucket', rate: 0 } }],
    ['scenario.policy.algorithm', { ...base, policy: { algorithm: 'nope' } }],
    ['scenario.instances', { ...base, instances: 1.5 }],
    [
      'scenario.autoscale[1].atMs',
      {
        ...base,
        autoscale: [
          { atMs: 500, instances: 2 },
          { atMs: 400, instances: 3 },
        ],
      },
    ],
    ['scenario.autoscale[0].leave', { ...base, autoscale: [{ atMs: 5, instances: 2, leave: 'explode' }] }],
    ['scenario.balancer.kind', { ...base, balancer: { kind: 'magic' } }],
    ['scenario.balancer.weights[1]', { ...base, balancer: { kind: 'weighted', weights: [1, 0] } }],
    ['scenario.latency.jitter', { ...base, latency: { meanMs: 0.3, jitter: 2 } }],
    ['scenario.traffic.demand.shape', { ...base, traffic: { demand: { shape: 'wave' } } }],
    ['scenario.traffic.demand', { ...base, traffic: { demand: { shape: 'steady', load: 0 } } }],
    ['scenario.traffic.keys.count', { ...base, traffic: { ...base.traffic, keys: { count: 0, zipf: 1 } } }],
    [
      'scenario.traffic.costs[0].cost',
      { ...base, traffic: { ...base.traffic, costs: [{ cost: Number.NaN, weight: 1 }] } },
    ],
    [
      'scenario.traffic.retry.honourRetryAfter',
      { ...base, traffic: { ...base.traffic, retry: { maxRetries: 1, backoffMs: 5 } } },
    ],
    [
      'scenario.durationMs',
      { ...base, durationMs: 86_400_000, traffic: { demand: { shape: 'steady', load: 100 } } },
    ],
  ])('names %s when it is wrong', (field, raw) => {
    expect(fieldOf(raw)).toBe(field);
  });
});
