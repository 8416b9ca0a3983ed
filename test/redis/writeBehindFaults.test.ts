/**
 * Write-behind allowances when store calls are lost, for the token bucket and both windows, on a
 * real redis-server this file starts: a freeze that makes batches carrying usage reports time out
 * (they run once Redis resumes), and instances that crash with usage they never reported. Every
 * call the limiters make is written down (`LedgerStore`), so each key's state in Redis can be
 * checked against what the calls explain: nothing charged twice. Admissions are counted decision
 * by decision against the bound of docs/architecture.md "Guarantees": the exact limiter, plus the
 * allowances' unreported usage (`LeasedAlgorithm.outstanding`: half a bucket's burst, `(N - 1) ·
 * floor(limit / (4 · fleet))` for a window), plus one first-sight request per instance and key (a
 * bucket's), plus, for each crashed instance, the allowance it held (`LeasedAlgorithm.share`).
 */
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { trackClient } from '../support/clients.js';
import {
  algorithmOf,
  LEASED_ALGORITHMS,
  policiesOf,
  storageKeyOf,
  WINDOW_START,
  windowClock,
} from '../support/leasedAlgorithms.js';
import {
  admittedOf,
  burst,
  consumeCounted,
  fleetCounted,
  keysWithoutTtl,
  ledgerMember,
  type Member,
  type Target,
  traffic,
} from '../support/ledgerFleet.js';
import { callsCharge } from '../support/ledgerStore.js';
import { privateRedis } from '../support/privateRedis.js';

const delay = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

const { server } = privateRedis();

/** Waits (up to about 10 s) until `done()`, looking every 20 ms. */
async function until(done: () => boolean | Promise<boolean>): Promise<void> {
  for (let i = 0; i < 500 && !(await done()); i++) await delay(20);
}

describe('write-behind under lost store calls', () => {
  it('a freeze times out batches carrying usage reports: none is applied twice, and the bound holds', async () => {
    const CAPACITY = 1000;
    const N = 6;
    const KEYS = ['a', 'b', 'c'];
    // No refill worth counting while the test runs (one token a day) and no window ending (the
    // clock); 'closed' so that nothing is admitted by a fail policy: every admission is a lease's
    // or an allowance's.
    const shape = { capacity: CAPACITY, perSecond: 1 / 86_400, leaseTtl: '500ms', fail: 'closed' } as const;
    const policies = policiesOf(shape);
    const now = windowClock();
    const members = await Promise.all(
      Array.from({ length: N }, () =>
        ledgerMember({ url: server().url, policies, prefix: 'freeze:', timeoutMs: 100, now }),
      ),
    );
    expect(await fleetCounted(members, N), 'every instance counted the fleet').toEqual(members.map(() => N));
    const targetsOf = (policy: string) => KEYS.map((key) => ({ policy, key }));
    const targets = LEASED_ALGORITHMS.flatMap((a) => targetsOf(a.algorithm));
    const firstSights = LEASED_ALGORITHMS.map((a) => ({ policy: a.algorithm, key: 'first-sight' }));
    const id = storageKeyOf;
    const entries = () => members.flatMap((m) => m.ledger.entries);

    const errors: string[] = [];
    // Each instance asks for every key about every 4 ms: 1500 requests a second per key, so the
    // keys start far from their limit (allowances) and end past it.
    const load = traffic(members, targets, errors, 4);
    // Frozen once every instance holds an allowance of every key: spending it, each falls due to
    // report in the freeze.
    const holds = (m: Member, t: Target) =>
      m.ledger.entries.some(
        (e) => e.key === id(t) && e.outcome === 'ok' && (e.result as { allowance: number }).allowance > 0,
      );
    await until(() => members.every((m) => targets.every((t) => holds(m, t))));
    const frozenAt = Date.now();
    process.kill(server().pid, 'SIGSTOP');
    try {
      // Every instance spends what an allowance can hold of every key, down past the point where
      // it reports (a quarter left): the reports go out in batches, which time out. And a key
      // every instance sees for the first time: a bucket admits it at once and reports it in a
      // batch, which times out too.
      await burst(
        members,
        [...targets, ...firstSights],
        (t) => (t.key === 'first-sight' ? 1 : algorithmOf(t).share(CAPACITY, N) + 1),
        errors,
      );
      await delay(400);
    } finally {
      process.kill(server().pid, 'SIGCONT');
    }
    const resumedAt = Date.now();
    // The frozen batches run; traffic goes on until every key went past its limit.
    // The frozen batches run; traffic goes on until every key reached its limit in Redis.
    const admin = trackClient(new Redis(server().url));
    const chargedOf = (t: Target) =>
      algorithmOf(t).charged(admin, members[0]!.store.redisKey(id(t)), CAPACITY, now());
    const reachedLimit = async () =>
      (await Promise.all(targets.map(chargedOf))).every((charged) => charged >= CAPACITY - 0.01);
    await until(reachedLimit);
    expect(await reachedLimit(), 'every key reached its limit').toBe(true);
    await load.stop();
    await Promise.all(members.map((m) => m.limiter.close()));
    expect(errors, 'no rejection reaches the caller, no decision hangs').toEqual([]);

    const report: string[] = [];
    for (const algorithm of LEASED_ALGORITHMS) {
      const name = algorithm.name;
      const lostReports = entries().filter(
        (e) =>
          e.script === algorithm.syncScript &&
          e.outcome === 'unknown' &&
          (e.req as { used: number }).used > 0 &&
          e.at >= frozenAt - 100 &&
          e.at < resumedAt,
      );
      expect(
        lostReports.length,
        `${name}: batches carrying usage reports timed out in the freeze`,
      ).toBeGreaterThan(0);
      const bound =
        algorithm.exact(shape, 0) + algorithm.outstanding(CAPACITY, N, N) + (algorithm.firstSight ? N : 0);
      for (const target of [
        ...targetsOf(algorithm.algorithm),
        { policy: algorithm.algorithm, key: 'first-sight' },
      ]) {
        const label = `${name} ${target.key}`;
        const admitted = admittedOf(members, target);
        const charged = await algorithm.charged(
          admin,
          members[0]!.store.redisKey(id(target)),
          CAPACITY,
          now(),
        );
        const { least, most, unknown, unknownUsed } = callsCharge(entries(), id(target));
        report.push(
          `${label}: admitted ${admitted} (bound ${bound}), charged ${charged.toFixed(2)} (calls explain ${least.toFixed(0)}..${most.toFixed(0)}; ${unknown} unanswered carrying ${unknownUsed} usage)`,
        );
        // Nothing taken twice: the state is what the calls explain, each applied at most once.
        expect(charged, `${label}: charged at most what the calls explain`).toBeLessThanOrEqual(most + 0.01);
        expect(charged, `${label}: charged at least what the answers said`).toBeGreaterThanOrEqual(
          least - 0.01,
        );
        // The frozen batches ran once Redis resumed, and close() reported the rest: every admission
        // is counted (more may be: leases granted in calls whose reply was lost).
        expect(charged, `${label}: every admission counted`).toBeGreaterThanOrEqual(admitted - 0.01);
        // The stated bound (nothing is lost in a freeze: the reports ran late).
        expect(
          admitted,
          `${label}: the exact limit + the allowances outstanding + first sights`,
        ).toBeLessThanOrEqual(bound);
      }
    }
    expect(await keysWithoutTtl(admin), 'every key has a TTL').toEqual([]);
    console.log(`freeze of 400 ms\n${report.join('\n')}`);
    await Promise.all(members.map((m) => m.store.close()));
  });

  it.each(LEASED_ALGORITHMS)(
    '$name: instances crashing with unreported usage: the fleet stays within the bound over the next periods',
    async (algorithm) => {
      // A refilling bucket, a window that does not end, on a virtual clock shared by the limiters
      // and the store (RedisStore `now`), so what the exact limiter admits over the run is known.
      const shape = { capacity: 400, perSecond: 100, fail: 'closed' } as const;
      const N = 8;
      const CRASHED = 4;
      let t = WINDOW_START;
      const now = () => t;
      const members = await Promise.all(
        Array.from({ length: N }, () =>
          ledgerMember({
            url: server().url,
            policies: { [algorithm.algorithm]: algorithm.policy(shape) },
            prefix: `crash-${algorithm.algorithm}:`,
            timeoutMs: 2000,
            now,
            sweepIntervalMs: 0,
          }),
        ),
      );
      const sweep = async (alive: readonly Member[]) => {
        for (const m of alive) m.limiter.sweep();
        await delay(10);
      };
      for (let i = 0; i < 200 && members.some((m) => m.limiter.stats().fleet !== N); i++) {
        await sweep(members);
        t += 500;
      }
      expect(members.map((m) => m.limiter.stats().fleet)).toEqual(members.map(() => N));
      const errors: string[] = [];
      const target = { policy: algorithm.algorithm, key: 'k' };
      const start = t;
      // Far from the limit: every instance learns the key and takes an allowance (a bucket's
      // level / 16, about 25 once the first sights are reported; a window's (limit / 2) / 16 = 12).
      await Promise.all(members.map((m) => consumeCounted(m, target, errors)));
      await sweep(members);
      // The instances about to crash spend most of their allowance and report none of it.
      const crashed = members.slice(0, CRASHED);
      for (const m of crashed) for (let i = 0; i < 8; i++) await consumeCounted(m, target, errors);
      for (const m of crashed) m.client.disconnect();
      const admittedByCrashed = admittedOf(crashed, target);

      // The survivors go over the limit for the next 12 s, 400 requests a second each: the crashed
      // instances still count in the fleet for its window (10 s), then the survivors share the key.
      const survivors = members.slice(CRASHED);
      for (let step = 0; step < 120; step++) {
        await Promise.all(
          survivors.flatMap((m) => Array.from({ length: 40 }, () => consumeCounted(m, target, errors))),
        );
        await sweep(survivors);
        t += 100;
      }
      expect(errors, 'no rejection reaches the caller, no decision hangs').toEqual([]);
      expect(
        survivors.map((m) => m.limiter.stats().fleet),
        'the crashed instances left the fleet',
      ).toEqual(survivors.map(() => N - CRASHED));
      const admitted = admittedOf(members, target);
      const exact = algorithm.exact(shape, t - start);
      const share = algorithm.share(shape.capacity, N);
      const bound =
        exact +
        algorithm.outstanding(shape.capacity, N, N) +
        (algorithm.firstSight ? N : 0) +
        CRASHED * share;
      const reported = crashed
        .flatMap((m) => m.ledger.entries)
        .filter((e) => e.script === algorithm.syncScript && e.outcome === 'ok')
        .reduce((sum, e) => sum + (e.req as { used: number }).used, 0);
      console.log(
        `${algorithm.name} crash: ${CRASHED} of ${N} instances crashed with ${admittedByCrashed - reported} admissions unreported; ` +
          `the fleet admitted ${admitted} over ${t - start} ms, exact ${exact}, bound ${bound} (one allowance per crash: ${share})`,
      );
      expect(
        admittedByCrashed - reported,
        'the crashed instances took unreported usage with them',
      ).toBeGreaterThan(0);
      expect(
        admitted,
        'the exact limit, the allowances outstanding, first sights and one allowance per crash',
      ).toBeLessThanOrEqual(bound);
      await Promise.all(survivors.map((m) => m.limiter.close()));
      expect(await keysWithoutTtl(trackClient(new Redis(server().url))), 'every key has a TTL').toEqual([]);
      await Promise.all(members.map((m) => m.store.close()));
    },
  );
});
