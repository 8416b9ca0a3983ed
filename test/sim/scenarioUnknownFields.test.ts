/**
 * A scenario given to `--replay` (or built in code) with a field the simulator does not read: a
 * misspelt `autoscal` or `maxRetry` was ignored, so the run went on without the scaling or the
 * retries the user wrote and still reported `ok` (found in the third operator trial). Every object
 * of a scenario now names its unknown field, as policies do.
 */
import { describe, expect, it } from 'vitest';
import { parseScenario, type ScenarioInput } from '../../sim/scenario.js';
import { ConfigError } from '../../src/index.js';

const base: ScenarioInput = {
  name: 'base',
  policy: { algorithm: 'token-bucket', rate: 100, burst: 100 },
  durationMs: 1000,
  traffic: {
    demand: { shape: 'steady', load: 1 },
    keys: { count: 1, zipf: 1 },
    costs: [{ cost: 1, weight: 1 }],
    retry: { honourRetryAfter: true, maxRetries: 2, backoffMs: 10 },
  },
  autoscale: [{ atMs: 500, instances: 3, leave: 'close' }],
  balancer: { kind: 'zipf', s: 1 },
  latency: { meanMs: 0.3, jitter: 0.5 },
  expect: { maxAbsDriftPct: 2 },
};

/** `base` with `value` at the dotted `path` (array indices as numbers). */
function withField(path: string, value: unknown): unknown {
  const copy = structuredClone(base) as Record<string, unknown>;
  const parts = path.split('.');
  let at = copy as Record<string, unknown>;
  for (const p of parts.slice(0, -1)) at = at[p] as Record<string, unknown>;
  at[parts.at(-1)!] = value;
  return copy;
}

describe('a scenario field the simulator does not read', () => {
  it('base is a valid scenario', () => {
    expect(() => parseScenario(base)).not.toThrow();
  });

  it.each([
    ['autoscal', 'scenario.autoscal'],
    ['traffic.keyz', 'scenario.traffic.keyz'],
    ['traffic.demand.lod', 'scenario.traffic.demand.lod'],
    ['traffic.keys.zipF', 'scenario.traffic.keys.zipF'],
    ['traffic.costs.0.weigth', 'scenario.traffic.costs[0].weigth'],
    ['traffic.retry.maxRetry', 'scenario.traffic.retry.maxRetry'],
    ['autoscale.0.leaves', 'scenario.autoscale[0].leaves'],
    ['balancer.S', 'scenario.balancer.S'],
    ['latency.mean', 'scenario.latency.mean'],
    ['expect.maxDriftPct', 'scenario.expect.maxDriftPct'],
  ])('%s is a ConfigError naming it', (path, field) => {
    let err: unknown;
    try {
      parseScenario(withField(path, 1));
    } catch (e) {
      err = e;
    }
    expect(err, path).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).field).toBe(field);
  });
});
