import { describe, expect, it } from 'vitest';
import { VirtualClock } from '../sim/clock.js';
import { LatencyStore } from '../sim/latencyStore.js';
import { Limiter, MemoryStore, type PolicyConfig } from '../src/index.js';

/** A small deterministic generator (the same numbers on every run). */
function random(seed: number): () => number {
  let s = seed;
  return () => {
    s = (s * 1103515245 + 12345) % 2147483648;
    return s / 2147483648;
  };
}

const INSTANCES = 20;
const SECONDS = 30;

/**
 * One key, 20 instances sharing a store behind 1 ms (±50 %) of latency, skewed balancing (the
 * busiest instance sees ~20 % of the traffic, the quietest almost none), evenly spaced requests,
 * sweeps every 500 ms — in virtual time.
 */
async function run(policy: PolicyConfig, perSecond: number) {
  const clock = new VirtualClock();
  const store = new LatencyStore(
    new MemoryStore({ now: clock.now }),
    clock,
    { meanMs: 1, jitter: 0.5 },
    random(7),
  );
  const instances = Array.from(
    { length: INSTANCES },
    () => new Limiter({ store, policies: { p: policy }, now: clock.now, sweepIntervalMs: 0 }),
  );
  const pick = random(11);
  let admitted = 0;
  let decisions = 0;
  for (let i = 0; i < perSecond * SECONDS; i++) {
    const limiter = instances[Math.floor(pick() * pick() * INSTANCES)]!;
    clock.at(1 + (i * 1000) / perSecond, () => {
      limiter.consume('p', 'k').then((d) => {
        decisions++;
        if (d.allowed) admitted++;
      });
    });
  }
  for (let t = 0; t < SECONDS * 1000; t += 500)
    clock.at(t, () => {
      for (const l of instances) l.sweep();
    });
  await clock.run(SECONDS * 1000 + 100);
  return { admitted, callsPerDecision: store.calls.count / decisions };
}

describe('leased windows against their exact reference (20 instances, skewed, 10 s windows)', () => {
  it.each([
    ['fixed-window', 6],
    ['fixed-window', 1.05],
    ['fixed-window', 0.8],
    ['sliding-window', 6],
    ['sliding-window', 1.05],
    ['sliding-window', 0.8],
  ] as const)('%s at %sx the limit: within 2 percent of exact', async (algorithm, load) => {
    const policy = { algorithm, limit: 1000, window: '10s' } as const;
    const leased = await run(policy, 100 * load);
    const exact = await run({ ...policy, lease: 'exact' }, 100 * load);
    const drift = (leased.admitted - exact.admitted) / exact.admitted;
    expect(Math.abs(drift), `leased ${leased.admitted}, exact ${exact.admitted}`).toBeLessThanOrEqual(0.02);
    if (load < 1) expect(leased.admitted, 'below the limit nothing is refused').toBe(100 * load * SECONDS);
    if (load === 6) expect(leased.callsPerDecision).toBeLessThanOrEqual(0.2);
  });
});
