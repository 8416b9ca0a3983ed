/**
 * `setPolicies` shrinking a leased policy's limit while instances hold leases, allowances and
 * unreported usage of the old one, and with consumes still in flight: 1 to 4 limiters on one store
 * (MemoryStore, and RedisStore on the suite's Redis) and a virtual clock that stands still from the
 * change on, so that no refill and no new window comes to the rescue. What the fleet admits after
 * the change is at most the new burst or limit: the old rule's leased tokens go back to a bucket
 * that the new burst caps, and an instance that knew the key before the change does not admit a
 * first sight of it again.
 */
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { Limiter, type PolicyConfig, type Store } from '../../src/index.js';
import { closeAllClients } from '../support/clients.js';
import { LEASED_ALGORITHMS, type LeasedAlgorithm } from '../support/leasedAlgorithms.js';
import { FRESH_STORES } from '../support/stores.js';

/** Lets store calls (a Redis round trip too) and what they trigger run to their end. */
async function settle(): Promise<void> {
  for (let i = 0; i < 3; i++) await new Promise((resolve) => setTimeout(resolve, 1));
}

/** Heartbeats on the virtual clock until every limiter counts the whole fleet. */
async function countFleet(members: readonly Limiter[], clock: { t: number }): Promise<void> {
  for (let i = 0; i < 20 && members.some((m) => m.stats().fleet !== members.length); i++) {
    for (const m of members) m.sweep();
    await settle();
    clock.t += 500;
  }
  expect(members.map((m) => m.stats().fleet)).toEqual(members.map(() => members.length));
}

afterAll(closeAllClients);

type Algorithm = 'token-bucket' | 'fixed-window' | 'sliding-window';

function policy(algorithm: Algorithm, capacity: number, writeBehind: boolean): PolicyConfig {
  // A refill of one token an hour: none while the clock stands still after the change.
  if (algorithm === 'token-bucket') {
    return { algorithm, rate: 1, period: '1h', burst: capacity, lease: { writeBehind } };
  }
  return { algorithm, limit: capacity, window: '1h', lease: { writeBehind } };
}

const scenario = fc.record({
  algorithm: fc.constantFrom<Algorithm>('token-bucket', 'fixed-window', 'sliding-window'),
  instances: fc.integer({ min: 1, max: 4 }),
  writeBehind: fc.boolean(),
  before: fc.integer({ min: 41, max: 200 }),
  after: fc.integer({ min: 1, max: 40 }),
  // Consumes before the change: by which instance, and whether the next one waits for it.
  early: fc.array(fc.record({ by: fc.nat(3), awaited: fc.boolean() }), { maxLength: 80 }),
  sweepBefore: fc.boolean(),
  // Consumes after it, in rounds started together.
  late: fc.array(fc.array(fc.nat(3), { minLength: 1, maxLength: 8 }), { minLength: 1, maxLength: 12 }),
});

const sum = (members: readonly Limiter[], f: (m: Limiter) => number) =>
  members.reduce((total, m) => total + f(m), 0);

type Scenario = typeof scenario extends fc.Arbitrary<infer T> ? T : never;

async function run(makeStore: () => Promise<Store>, s: Scenario, clock: { t: number }) {
  const store = await makeStore();
  const now = () => clock.t;
  const members = Array.from(
    { length: s.instances },
    () =>
      new Limiter({
        store,
        policies: { p: policy(s.algorithm, s.before, s.writeBehind) },
        now,
        sweepIntervalMs: 0,
      }),
  );
  try {
    await countFleet(members, clock);
    const at = (by: number) => members[by % s.instances] as Limiter;
    const pending: Promise<unknown>[] = [];
    for (const { by, awaited } of s.early) {
      const call = at(by).consume('p', 'k');
      pending.push(call);
      if (awaited) await call;
    }
    if (s.sweepBefore) for (const m of members) m.sweep();
    // What was in flight at the change was decided under the old policy: it does not count after.
    const returnedBefore = sum(members, (m) => m.stats().tokensReturned);
    for (const m of members) m.setPolicies({ p: policy(s.algorithm, s.after, s.writeBehind) });
    let admitted = 0;
    for (const round of s.late) {
      const decisions = await Promise.all(round.map((by) => at(by).consume('p', 'k')));
      admitted += decisions.filter((d) => d.allowed).length;
    }
    await Promise.all(pending);
    await settle();
    // Leased tokens the old rule's states held (or had in flight) and handed back.
    const held = sum(members, (m) => m.stats().tokensReturned) - returnedBefore;
    return { admitted, held };
  } finally {
    await Promise.all(members.map((m) => m.close()));
    await store.close();
  }
}

describe.each(Object.entries(FRESH_STORES))('setPolicies shrinking a burst (%s)', (_kind, makeStore) => {
  it('instances that saw a key before the change admit no second first sight of it', async () => {
    const clock = { t: 3_600_000 * 500 + 1000 };
    const store = await makeStore('resight', () => clock.t);
    const members = [0, 1].map(
      () =>
        new Limiter({
          store,
          policies: { p: policy('token-bucket', 41, true) },
          now: () => clock.t,
          sweepIntervalMs: 0,
        }),
    );
    try {
      await countFleet(members, clock);
      // Their first sights, admitted before the store answered, the answers still on their way.
      const first = members.map((m) => m.consume('p', 'k'));
      for (const m of members) m.setPolicies({ p: policy('token-bucket', 1, true) });
      const after = await Promise.all(members.map((m) => m.consume('p', 'k')));
      await Promise.all(first);
      expect(after.filter((d) => d.allowed).length, 'admitted under burst 1').toBe(1);
    } finally {
      await Promise.all(members.map((m) => m.close()));
      await store.close();
    }
  });
});

describe.each(Object.entries(FRESH_STORES))('setPolicies shrinking a limit (%s)', (_kind, makeStore) => {
  it('admits at most the new limit after the change', { timeout: 120_000 }, async () => {
    await fc.assert(
      fc.asyncProperty(scenario, async (s) => {
        const clock = { t: 3_600_000 * 500 + 1000 };
        const { admitted, held } = await run(() => makeStore('shrink', () => clock.t), s, clock);
        // docs/architecture.md "Guarantees", for any key: allowances outstanding, and a bucket's
        // first sight of a key, one per instance that had not seen it before the change.
        const algorithm = LEASED_ALGORITHMS.find((a) => a.algorithm === s.algorithm) as LeasedAlgorithm;
        const seen = new Set(s.early.map((e) => e.by % s.instances)).size;
        const writeBehind = s.writeBehind
          ? algorithm.outstanding(s.after, s.instances, s.instances) +
            (algorithm.firstSight ? s.instances - seen : 0)
          : 0;
        expect(admitted, `admitted after the change (${held} held)`).toBeLessThanOrEqual(
          s.after + held + writeBehind,
        );
      }),
      { numRuns: Number(process.env.SHRINK_RUNS ?? 40) },
    );
  });
});
