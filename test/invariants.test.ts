import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { VirtualClock } from '../sim/clock.js';
import { LatencyStore } from '../sim/latencyStore.js';
import { Limiter, MemoryStore } from '../src/index.js';

/**
 * The leasing invariants, on random traffic against several limiters sharing one store through a
 * modelled network, in virtual time:
 *  - over any window of length L the cluster admits at most burst + rate·L + H, where H is what the
 *    instances may hold in leases when the window opens: 2 · maxLease per instance (a lease and the
 *    one fetched ahead);
 *  - while demand stays well below the limit, nothing is denied.
 */

interface Traffic {
  instances: number;
  rate: number;
  burst: number;
  /** Arrival times (ms) and the instance each one goes to. */
  arrivals: { at: number; instance: number; cost: number }[];
}

async function simulate(t: Traffic) {
  const clock = new VirtualClock();
  let seed = 1;
  const random = () => {
    seed = (seed * 48271) % 2147483647;
    return seed / 2147483647;
  };
  const store = new LatencyStore(
    new MemoryStore({ now: clock.now }),
    clock,
    { meanMs: 0.3, jitter: 0.5 },
    random,
  );
  const policies = {
    p: { algorithm: 'token-bucket' as const, rate: t.rate, period: '1s' as const, burst: t.burst },
  };
  const limiters = Array.from(
    { length: t.instances },
    () => new Limiter({ store, policies, now: clock.now, sweepIntervalMs: 0 }),
  );
  const admitted: { at: number; cost: number }[] = [];
  let denied = 0;
  for (const a of t.arrivals) {
    clock.at(a.at, () => {
      limiters[a.instance]!.consume('p', 'k', a.cost).then((d) => {
        if (d.allowed) admitted.push({ at: clock.now(), cost: a.cost });
        else denied++;
      });
    });
  }
  const end = Math.max(0, ...t.arrivals.map((a) => a.at)) + 5000;
  for (let x = 100; x < end; x += 100)
    clock.at(x, () => {
      for (const l of limiters) l.sweep();
    });
  // close() reports what allowances admitted: its store calls need the clock still running.
  let closed: Promise<unknown> = Promise.resolve();
  clock.at(end - 1000, () => {
    closed = Promise.all(limiters.map((l) => l.close()));
  });
  await clock.run(end);
  await closed;
  return { admitted, denied };
}

/** Largest (admitted in window) − (burst + rate·L) over all windows starting and ending at admissions. */
function worstExcess(admitted: { at: number; cost: number }[], rate: number, burst: number): number {
  const a = [...admitted].sort((x, y) => x.at - y.at);
  let worst = Number.NEGATIVE_INFINITY;
  for (let i = 0; i < a.length; i++) {
    let sum = 0;
    for (let j = i; j < a.length; j++) {
      sum += a[j]!.cost;
      worst = Math.max(worst, sum - (burst + (rate * (a[j]!.at - a[i]!.at)) / 1000));
    }
  }
  return worst;
}

const traffic = (load: { min: number; max: number }) =>
  fc
    .record({
      instances: fc.integer({ min: 1, max: 12 }),
      rate: fc.constantFrom(10, 50, 100),
      burstFactor: fc.constantFrom(1, 2),
      load: fc.double({ ...load, noNaN: true }),
      seconds: fc.integer({ min: 1, max: 4 }),
      skew: fc.double({ min: 0, max: 2, noNaN: true }),
      seed: fc.integer({ min: 1, max: 1e9 }),
    })
    .map(({ instances, rate, burstFactor, load, seconds, skew, seed }): Traffic => {
      let s = seed;
      const rnd = () => {
        s = (s * 48271) % 2147483647;
        return s / 2147483647;
      };
      const weights = Array.from({ length: instances }, (_, i) => 1 / (i + 1) ** skew);
      const total = weights.reduce((x, y) => x + y, 0);
      const pick = () => {
        let r = rnd() * total;
        for (let i = 0; i < instances; i++) {
          r -= weights[i]!;
          if (r <= 0) return i;
        }
        return instances - 1;
      };
      const arrivals: Traffic['arrivals'] = [];
      const perMs = (rate * load) / 1000;
      for (let at = -Math.log(1 - rnd()) / perMs; at < seconds * 1000; at += -Math.log(1 - rnd()) / perMs) {
        arrivals.push({ at, instance: pick(), cost: 1 });
      }
      return { instances, rate, burst: rate * burstFactor, arrivals };
    });

describe('leasing invariants', () => {
  it('never admits more than burst + rate·L + 2·maxLease per instance in any window', async () => {
    await fc.assert(
      fc.asyncProperty(traffic({ min: 0.5, max: 8 }), async (t) => {
        const { admitted } = await simulate(t);
        const maxLease = Math.max(1, Math.floor(t.burst * 0.1));
        const bound = 2 * maxLease * t.instances;
        const w = worstExcess(admitted, t.rate, t.burst);
        expect(w).toBeLessThanOrEqual(bound);
      }),
      { numRuns: 25 },
    );
  });

  it('denies nothing while demand stays below half the limit', async () => {
    await fc.assert(
      fc.asyncProperty(traffic({ min: 0.05, max: 0.5 }), async (t) => {
        // Poisson arrivals may bunch; only keep traffic an exact bucket admits with room to spare.
        const tight = worstExcess(
          t.arrivals.map((a) => ({ at: a.at, cost: a.cost })),
          t.rate,
          t.burst / 2,
        );
        fc.pre(tight <= 0);
        const { denied } = await simulate(t);
        expect(denied).toBe(0);
      }),
      { numRuns: 25 },
    );
  });
});
