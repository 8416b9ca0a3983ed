import { describe, expect, it } from 'vitest';
import { singlePolicy } from '../../sim/deployment.js';
import { type RunOptions, simulate } from '../../sim/engine.js';
import type { SyncStore } from '../../sim/latencyStore.js';
import { summarize } from '../../sim/report.js';
import { parseScenario, type ScenarioInput } from '../../sim/scenario.js';
import { MemoryStore, type PolicyConfig } from '../../src/index.js';

const exactWindow: PolicyConfig = { algorithm: 'fixed-window', limit: 10, window: '100ms', lease: 'exact' };

/**
 * Ten keys at twice their limit for 30 windows of 100 ms through 5 instances: a request lands in
 * the last tenth of a millisecond before a window boundary of a full key dozens of times, the case
 * where reading the time at the request and at the store disagree. An exact policy keeps the 0 %
 * drift target the CLI gives it (`--policy` with `lease: 'exact'`).
 */
const boundaries = (
  policy: PolicyConfig,
  traffic: Partial<ScenarioInput['traffic']> = {},
): ScenarioInput => ({
  name: 'window-boundaries',
  policy,
  durationMs: 3000,
  instances: 5,
  traffic: { demand: { shape: 'steady', load: 20 }, keys: { count: 10, zipf: 0 }, ...traffic },
  expect: { maxAbsDriftPct: 0 },
});

async function failedChecks(input: ScenarioInput, options?: RunOptions): Promise<string[]> {
  const report = summarize(await simulate(parseScenario(input), options));
  expect(report.summary.exactRequests, 'the keys were full: the exact limiter refused some').toBeLessThan(
    report.summary.requests,
  );
  return report.checks.filter((c) => !c.ok).map((c) => `${c.kind} ${c.name}: ${c.detail}`);
}

/** A shared store that loses one write in `every`: the call runs on a key nobody reads again. */
function losingWrites(every: number): (clock: { now: () => number }) => SyncStore {
  return (clock) => {
    const inner = new MemoryStore({ now: clock.now });
    let calls = 0;
    return {
      runSync: (op, key, req) => inner.runSync(op, ++calls % every === 0 ? `${key}:lost:${calls}` : key, req),
    };
  };
}

describe('the exact reference decides when the fleet does', () => {
  // Before the reference waited for the store arrival, this failed: per key +1 token (a request
  // just before a boundary reached the store in the next window) and up to 3 denials below the
  // limit per key.
  it.each([
    ['cost 1', {}],
    [
      'weighted costs',
      {
        costs: [
          { cost: 1, weight: 3 },
          { cost: 3, weight: 1 },
        ],
      },
    ],
    [
      'clients retrying after Retry-After',
      {
        demand: { shape: 'steady' as const, load: 5 },
        retry: { honourRetryAfter: true, maxRetries: 2, backoffMs: 5 },
      },
    ],
  ])('an exact fixed window across window boundaries passes every check (%s)', async (_, traffic) => {
    expect(await failedChecks(boundaries(exactWindow, traffic))).toEqual([]);
  });

  it('an exact fixed window passes every check on a long-tail scenario with autoscaling', async () => {
    const input: ScenarioInput = {
      ...boundaries(exactWindow),
      instances: 10,
      autoscale: [
        { atMs: 1000, instances: 20, leave: 'close' },
        { atMs: 2000, instances: 12, leave: 'close' },
      ],
      balancer: { kind: 'round-robin' },
      traffic: { demand: { shape: 'steady', load: 60 }, keys: { count: 200, zipf: 1 } },
    };
    expect(await failedChecks(input)).toEqual([]);
  });

  it('still fails an exact policy whose shared store loses writes', async () => {
    const failed = await failedChecks(boundaries(exactWindow), { sharedStore: losingWrites(50) });
    expectMissed(failed, ['bound drift bound:', 'target drift:']);
  });

  it('still fails a leased policy checked as if it were exact', async () => {
    const leased: PolicyConfig = { ...exactWindow, lease: { maxFraction: 0.5 } };
    const deployment = { ...singlePolicy(leased), models: singlePolicy(exactWindow).models };
    // Near the limit, tokens leased to one instance sit unused while a peer is refused, and
    // instances admit ahead of what they have reported.
    const nearLimit = boundaries(leased, { demand: { shape: 'steady', load: 12 } });
    const failed = await failedChecks(nearLimit, { deployment });
    expectMissed(failed, ['bound denials below limit:', 'target drift:']);
  });
});

/** Each of `prefixes` begins one of the `failed` checks (all of them listed when one does not). */
function expectMissed(failed: readonly string[], prefixes: readonly string[]): void {
  for (const prefix of prefixes) {
    expect(
      failed.some((f) => f.startsWith(prefix)),
      failed.join('\n'),
    ).toBe(true);
  }
}
