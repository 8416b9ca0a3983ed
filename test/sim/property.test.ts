import fc from 'fast-check';
import { describe, it } from 'vitest';
import { scenarioArb } from '../../sim/arbitraries.js';
import { simulate } from '../../sim/engine.js';
import { summarize } from '../../sim/report.js';
import { parseScenario, type ScenarioInput } from '../../sim/scenario.js';

/**
 * Random short scenarios (1–3 virtual seconds, 1–12 instances, any balancer, scaling with clean
 * exits and crashes, every traffic shape, retries, many keys, weighted costs, lease options and
 * exact mode) must keep every bound the report checks:
 *  - envelope: for every key and every window of length L, admitted ≤ burst + rate·(L + RTT) +
 *    2·maxLease·instances (RTT: admissions are timed when the gateway hears the answer);
 *  - drift bound: −(2·maxLease·instances + tokens lost in crashes) ≤ admitted − exact ≤
 *    2·maxLease·instances, in tokens (exact mode: admitted = exact);
 *  - denials below the limit (the exact limiter admitted with ≥ 10 % of the limit left): at most
 *    2·maxLease·instances, one per token the leases can hold.
 * A failure shrinks to a small scenario and prints the command that replays it.
 *
 * Fixed seed, so the suite is deterministic; explore further with
 * SIM_PROPERTY_SEED=<n> SIM_PROPERTY_RUNS=<n> npx vitest run test/sim/property.test.ts
 */
const seed = Number(process.env.SIM_PROPERTY_SEED ?? 20_251_130);
const numRuns = Number(process.env.SIM_PROPERTY_RUNS ?? 60);

async function violations(input: ScenarioInput): Promise<string[]> {
  const report = summarize(await simulate(parseScenario(input)));
  return report.checks.filter((c) => !c.ok).map((c) => `${c.name}: ${c.detail}`);
}

describe('accuracy bounds on random scenarios', () => {
  it('hold for every scenario; a failure prints its --replay command', async () => {
    await fc.assert(
      fc.asyncProperty(scenarioArb(), async (input) => {
        const failed = await violations(input);
        if (failed.length > 0) {
          throw new Error(`${failed.join('\n')}\nreplay: npm run sim -- --replay '${JSON.stringify(input)}'`);
        }
      }),
      { seed, numRuns },
    );
  });
});
