/**
 * Write-behind allowances when store calls are lost, on a real redis-server this file starts:
 * a freeze that makes batches carrying usage reports time out (they run once Redis resumes), and
 * instances that crash with usage they never reported. Every call the limiters make is written
 * down (`LedgerStore`), so the bucket's level in Redis can be checked against what the calls
 * explain: nothing charged twice. Admissions are counted decision by decision against the bound of
 * docs/architecture.md "Guarantees": the exact bucket, plus the allowances' unreported usage (at
 * most half the burst over the whole fleet), plus one first-sight request per
 * instance and key, plus, for each crashed instance, the allowance it held.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RedisStore } from '../../src/index.js';
import { storageKey } from '../../src/stores/keys.js';
import { storedLevel } from '../support/bucketState.js';
import { closeAllClients, trackClient } from '../support/clients.js';
import {
  admittedOf,
  consumeCounted,
  fleetCounted,
  ledgerMember,
  type Member,
  traffic,
} from '../support/ledgerFleet.js';
import { bucketCharge } from '../support/ledgerStore.js';
import { type RedisProcess, startRedis } from '../support/redisServer.js';

const delay = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

let server: RedisProcess;
beforeAll(async () => {
  server = await startRedis();
});
afterAll(async () => {
  await closeAllClients();
  await server.stop();
});

async function levelOf(admin: Redis, store: RedisStore, key: string, burst: number): Promise<number> {
  return storedLevel(admin, store.redisKey(storageKey('token-bucket', 'p', key)), burst);
}

describe('write-behind under lost store calls', () => {
  it('a freeze times out batches carrying usage reports: none is applied twice, and the bound holds', async () => {
    const BURST = 1000;
    const N = 6;
    const KEYS = ['a', 'b', 'c'];
    // No refill worth counting while the test runs (one token a day); 'closed' so that nothing is
    // admitted by a fail policy: every admission is a lease's or an allowance's.
    const policies = {
      p: {
        algorithm: 'token-bucket' as const,
        rate: 1,
        period: '1d' as const,
        burst: BURST,
        lease: { ttl: '500ms' as const },
        fail: 'closed' as const,
      },
    };
    const members = await Promise.all(
      Array.from({ length: N }, () =>
        ledgerMember({ url: server.url, policies, prefix: 'freeze:', timeoutMs: 100 }),
      ),
    );
    expect(await fleetCounted(members, N), 'every instance counted the fleet').toEqual(members.map(() => N));

    const errors: string[] = [];
    // Each instance asks for every key about every 4 ms: 1500 requests a second per key, so the
    // keys start far from their limit (allowances) and end past it.
    const load = traffic(members, KEYS, errors, 4);
    await delay(250);
    const frozenAt = Date.now();
    process.kill(server.pid, 'SIGSTOP');
    try {
      // A key every instance sees for the first time: admitted at once and reported in a batch,
      // which times out (as the allowances' reports do, if any falls due in the freeze).
      await Promise.all(members.map((m) => consumeCounted(m, 'first-sight', errors)));
      await delay(400);
    } finally {
      process.kill(server.pid, 'SIGCONT');
    }
    const resumedAt = Date.now();
    await delay(1000);
    await load.stop();
    await Promise.all(members.map((m) => m.limiter.close()));

    expect(errors, 'no rejection reaches the caller, no decision hangs').toEqual([]);
    const decided = members.reduce((sum, m) => sum + [...m.sources.values()].reduce((a, b) => a + b, 0), 0);
    const allowed = KEYS.reduce((sum, key) => sum + admittedOf(members, key), 0);
    expect(decided - allowed, 'the keys went past their limit: requests were refused').toBeGreaterThan(0);
    const entries = members.flatMap((m) => m.ledger.entries);
    const lostReports = entries.filter(
      (e) =>
        e.script === 'token_bucket_sync' &&
        e.outcome === 'unknown' &&
        (e.req as { used: number }).used > 0 &&
        e.at >= frozenAt - 100 &&
        e.at < resumedAt,
    );
    expect(lostReports.length, 'batches carrying usage reports timed out in the freeze').toBeGreaterThan(0);

    const admin = trackClient(new Redis(server.url));
    const report: string[] = [];
    for (const key of [...KEYS, 'first-sight']) {
      const id = members[0]!.store.redisKey(storageKey('token-bucket', 'p', key));
      const admitted = admittedOf(members, key);
      const charged = BURST - (await levelOf(admin, members[0]!.store, key, BURST));
      const { least, most, unknown, unknownUsed } = bucketCharge(
        entries,
        storageKey('token-bucket', 'p', key),
      );
      report.push(
        `${key}: admitted ${admitted}, charged ${charged.toFixed(2)} (calls explain ${least.toFixed(0)}..${most.toFixed(0)}; ${unknown} unanswered carrying ${unknownUsed} usage)`,
      );
      // Nothing taken twice: the level is what the calls explain, each applied at most once.
      expect(charged, `${key}: charged at most what the calls explain`).toBeLessThanOrEqual(most + 0.01);
      expect(charged, `${key}: charged at least what the answers said`).toBeGreaterThanOrEqual(least - 0.01);
      // The frozen batches ran once Redis resumed, and close() reported the rest: every admission
      // is counted (more may be: leases granted in calls whose reply was lost).
      expect(charged, `${key}: every admission counted`).toBeGreaterThanOrEqual(admitted - 0.01);
      // The stated bound.
      if (key !== 'first-sight')
        expect(admitted, `${key}: burst + half of it + one first sight per instance`).toBeLessThanOrEqual(
          BURST + BURST / 2 + N,
        );
      expect(await admin.pttl(id), `${key} has a TTL`).toBeGreaterThan(0);
    }
    console.log(`freeze of 400 ms, ${lostReports.length} usage reports timed out\n${report.join('\n')}`);
    await Promise.all(members.map((m) => m.store.close()));
  });

  it('instances crashing with unreported usage: the fleet stays within the bound over the next periods', async () => {
    // A refilling bucket on a virtual clock shared by the limiters and the store (RedisStore `now`),
    // so the exact bucket's admissions over the run are known: burst + rate · elapsed.
    const BURST = 400;
    const RATE_PER_MS = 0.1; // 100 a second
    const N = 8;
    const CRASHED = 4;
    let t = 1_000_000;
    const now = () => t;
    const policies = {
      p: {
        algorithm: 'token-bucket' as const,
        rate: 100,
        period: '1s' as const,
        burst: BURST,
        fail: 'closed' as const,
      },
    };
    const members = await Promise.all(
      Array.from({ length: N }, () =>
        ledgerMember({
          url: server.url,
          policies,
          prefix: 'crash:',
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
    const start = t;
    // Far from the limit: every instance learns the key and takes an allowance, level / 16: about
    // 25 once the first sights are reported.
    await Promise.all(members.map((m) => consumeCounted(m, 'k', errors)));
    await sweep(members);
    // The instances about to crash spend most of their allowance and report none of it.
    const crashed = members.slice(0, CRASHED);
    for (const m of crashed) for (let i = 0; i < 8; i++) await consumeCounted(m, 'k', errors);
    for (const m of crashed) m.client.disconnect();
    const admittedByCrashed = admittedOf(crashed, 'k');

    // The survivors go over the limit for the next 12 s, 400 requests a second each: the crashed
    // instances still count in the fleet for its window (10 s), then the survivors share the bucket.
    const survivors = members.slice(CRASHED);
    for (let step = 0; step < 120; step++) {
      await Promise.all(
        survivors.flatMap((m) => Array.from({ length: 40 }, () => consumeCounted(m, 'k', errors))),
      );
      await sweep(survivors);
      t += 100;
    }
    expect(errors, 'no rejection reaches the caller, no decision hangs').toEqual([]);
    expect(
      survivors.map((m) => m.limiter.stats().fleet),
      'the crashed instances left the fleet',
    ).toEqual(survivors.map(() => N - CRASHED));
    const admitted = admittedOf(members, 'k');
    const exact = BURST + RATE_PER_MS * (t - start);
    const share = Math.floor(BURST / (2 * N));
    const bound = exact + BURST / 2 + N + CRASHED * share;
    const reported = crashed
      .flatMap((m) => m.ledger.entries)
      .filter((e) => e.script === 'token_bucket_sync' && e.outcome === 'ok')
      .reduce((sum, e) => sum + (e.req as { used: number }).used, 0);
    console.log(
      `crash: ${CRASHED} of ${N} instances crashed with ${admittedByCrashed - reported} admissions unreported; ` +
        `the fleet admitted ${admitted} over ${t - start} ms, exact ${exact}, bound ${bound}`,
    );
    expect(
      admittedByCrashed - reported,
      'the crashed instances took unreported usage with them',
    ).toBeGreaterThan(0);
    expect(admitted, 'exact + half the burst + first sights + one allowance per crash').toBeLessThanOrEqual(
      bound,
    );
    await Promise.all(survivors.map((m) => m.limiter.close()));
    await Promise.all(members.map((m) => m.store.close()));
  });
});
