import { afterAll, describe, expect, inject, it } from 'vitest';
import type { ScenarioReport } from '../../sim/report.js';
import { closeAllClients, uniquePrefix } from '../support/clients.js';
import { simInProcess } from '../support/sim.js';

afterAll(closeAllClients);

/** Several instances racing for leases, scaling with a crash, retries and weighted costs: every store call path. */
const scenario = {
  name: 'redis-vs-memory',
  policy: { algorithm: 'token-bucket', rate: 100, burst: 100 },
  durationMs: 3000,
  instances: 4,
  autoscale: [
    { atMs: 1000, instances: 10, leave: 'close' },
    { atMs: 2000, instances: 3, leave: 'crash' },
  ],
  traffic: {
    demand: { shape: 'steady', load: 4 },
    keys: { count: 2, zipf: 1 },
    costs: [
      { cost: 1, weight: 3 },
      { cost: 5, weight: 1 },
    ],
    retry: { honourRetryAfter: true, maxRetries: 2, backoffMs: 10 },
  },
};

async function report(extra: string[]): Promise<{ store: string; report: ScenarioReport }> {
  const r = await simInProcess(['--replay', JSON.stringify(scenario), '--json', ...extra]);
  expect(r.code, r.stderr).toBe(0);
  const { store, reports } = JSON.parse(r.stdout);
  return { store, report: reports[0] };
}

describe('npm run sim -- --redis', () => {
  it('runs the scenario on the Lua scripts of a real redis-server and matches the MemoryStore run', async () => {
    const memory = await report([]);
    const redis = await report(['--redis', inject('redisUrl'), '--prefix', uniquePrefix('sim')]);
    expect(redis.store).toBe(`redis ${inject('redisUrl')}`);
    const m = memory.report.summary;
    const r = redis.report.summary;
    expect(m.requests, 'the scenario produced traffic').toBeGreaterThan(500);
    expect(r.storeCalls, 'the cluster went to Redis').toBeGreaterThan(50);
    // Virtual time stands still while Redis answers, and the Lua does the MemoryStore arithmetic
    // bit for bit, so the numbers match exactly, not just within noise.
    expect(r, `drift ${r.driftPct} % on Redis vs ${m.driftPct} % in memory`).toEqual(m);
    expect(
      redis.report.checks.every((c) => c.ok),
      JSON.stringify(redis.report.checks),
    ).toBe(true);
  });
});

describe('npm run sim -- --redis on a Redis Cluster', () => {
  it('runs a scenario when the URL names one node of a cluster (it hung in ready() before)', async () => {
    const node = inject('clusterNodes')[0]!;
    const url = `redis://${node.host}:${node.port}`;
    const r = await simInProcess([
      '--scenario',
      'near-limit',
      '--duration',
      '5s',
      '--redis',
      url,
      '--prefix',
      uniquePrefix('sim-cluster'),
      '--json',
    ]);
    expect(r.code, r.stderr).toBe(0);
    const { store, reports } = JSON.parse(r.stdout);
    expect(store).toBe(`redis cluster ${url}`);
    expect(reports[0].summary.storeCalls, 'the cluster went to Redis').toBeGreaterThan(10);
  });
});
