import fc from 'fast-check';
import { describe, it } from 'vitest';
import { scenarioArb, tailScenarioArb } from '../../sim/arbitraries.js';
import { simulate } from '../../sim/engine.js';
import { type Check, summarize } from '../../sim/report.js';
import { parseScenario, type ScenarioInput } from '../../sim/scenario.js';

/**
 * Random short scenarios (1–3 virtual seconds, 1–12 instances, any balancer, scaling with clean
 * exits and crashes, every traffic shape, retries, many keys, weighted costs, lease options and
 * exact mode) must keep every bound the report checks, per key:
 *  - envelope: for every key and every window of length L, admitted ≤ burst + rate·(L + RTT) +
 *    2·maxLease·instances (RTT: admissions are timed when the gateway hears the answer);
 *  - drift bound: −(2·maxLease·instances + tokens lost in crashes) ≤ admitted − exact ≤
 *    2·maxLease·instances, in tokens, for every key (exact mode: admitted = exact);
 *  - denials below the limit (the exact limiter admitted with ≥ 10 % of the limit left): at most
 *    2·maxLease·instances per key, one per token the leases can hold.
 * A failure shrinks to a small scenario and prints the command that replays it.
 *
 * The long-tail scenarios (issue 11: hundreds to thousands of Zipf keys at 10/s or 100/s, a hot
 * head over the limit) keep the same bounds. Their accuracy targets, |drift| ≤ 1 % and at most
 * 0.5 % of decisions denied below the limit, are the redesign's goal and are not met by every
 * short random run today; SIM_TAIL_TARGETS=1 asserts them as well.
 *
 * Fixed seed, so the suite is deterministic; explore further with
 * SIM_PROPERTY_SEED=<n> SIM_PROPERTY_RUNS=<n> npx vitest run test/sim/property.test.ts
 */
const seed = Number(process.env.SIM_PROPERTY_SEED ?? 20_251_130);
const numRuns = Number(process.env.SIM_PROPERTY_RUNS ?? 60);
const tailRuns = Math.max(1, Math.round(numRuns / 3));
const tailTargets = process.env.SIM_TAIL_TARGETS === '1';

async function violations(input: ScenarioInput, keep: (c: Check) => boolean): Promise<string[]> {
  const report = summarize(await simulate(parseScenario(input)));
  return report.checks.filter((c) => !c.ok && keep(c)).map((c) => `${c.name}: ${c.detail}`);
}

async function holds(input: ScenarioInput, keep: (c: Check) => boolean = () => true): Promise<void> {
  const failed = await violations(input, keep);
  if (failed.length > 0) {
    throw new Error(`${failed.join('\n')}\nreplay: npm run sim -- --replay '${JSON.stringify(input)}'`);
  }
}

describe('accuracy bounds on random scenarios', () => {
  it('hold for every scenario; a failure prints its --replay command', async () => {
    await fc.assert(
      fc.asyncProperty(scenarioArb(), (input) => holds(input)),
      { seed, numRuns },
    );
  });

  it(`hold on long-tail scenarios${tailTargets ? ', and so do the tail targets' : ''}`, async () => {
    await fc.assert(
      fc.asyncProperty(tailScenarioArb(), (input) => holds(input, (c) => tailTargets || c.kind === 'bound')),
      { seed, numRuns: tailRuns },
    );
  });
});
