import { describe, expect, it } from 'vitest';
import { simulate } from '../../sim/engine.js';
import { summarize } from '../../sim/report.js';
import { parseScenario, type ScenarioInput } from '../../sim/scenario.js';

/** A 5-second slice of the one-key-6x scenario with autoscaling and crashes, retries and several keys. */
const input: ScenarioInput = {
  name: 'determinism',
  policy: { algorithm: 'token-bucket', rate: 100, period: '1s', burst: 100 },
  durationMs: 3000,
  instances: 5,
  autoscale: [
    { atMs: 1000, instances: 20, leave: 'close' },
    { atMs: 2000, instances: 8, leave: 'crash' },
  ],
  traffic: {
    demand: { shape: 'steady', load: 6 },
    keys: { count: 3, zipf: 1 },
    retry: { honourRetryAfter: true, maxRetries: 2, backoffMs: 10 },
  },
};

const run = async (seed: number) => summarize(await simulate(parseScenario({ ...input, seed })));

describe('simulator determinism', () => {
  it('gives the same report for the same seed, and a different one for another seed', async () => {
    const [a, b, c] = [await run(7), await run(7), await run(8)];
    expect(a.summary.requests, 'the scenario produced traffic').toBeGreaterThan(1000);
    expect(b).toEqual(a);
    expect(c.summary, 'another seed draws other arrivals').not.toEqual(a.summary);
  });
});
