/**
 * Redis restarting without persistence (kill -9, a new process on the same port) and `SCRIPT FLUSH`,
 * both while batches of write-behind reports and leases are in flight, for the token bucket and
 * both windows at once, on a redis-server this file starts. No decision hangs or rejects, every key
 * keeps a TTL, each report lost with the process carried at most one allowance
 * (docs/architecture.md "Guarantees": one allowance per loss), and the state the new process holds
 * is what the calls made since the crash explain (`LedgerStore`): no call from before the crash is
 * replayed, and none runs twice after a NOSCRIPT.
 */
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { trackClient } from '../support/clients.js';
import {
  algorithmOf,
  LEASED_ALGORITHMS,
  policiesOf,
  storageKeyOf,
  windowClock,
} from '../support/leasedAlgorithms.js';
import { burst, fleetCounted, keysWithoutTtl, ledgerMember, traffic } from '../support/ledgerFleet.js';
import { callsCharge, handBackSlack } from '../support/ledgerStore.js';
import { privateRedis } from '../support/privateRedis.js';

const delay = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

const { server } = privateRedis();

async function commandCalls(admin: Redis, command: string): Promise<number> {
  const info = await admin.info('commandstats');
  return Number(new RegExp(`^cmdstat_${command}:calls=(\\d+)`, 'm').exec(info)?.[1] ?? 0);
}

describe('write-behind across a Redis restart and SCRIPT FLUSH', () => {
  it('batches in flight at a kill -9 and at SCRIPT FLUSH: nothing hangs, rejects, leaks or runs twice', async () => {
    const CAPACITY = 1000;
    const N = 4;
    const KEYS = Array.from({ length: 6 }, (_, i) => `k${i}`);
    // No refill while the test runs and no window ending (the clock); the default fail policy
    // ('local') answers while Redis is down, and a bucket's writes back what it admitted once it is
    // back (token_bucket_debit, in the ledger too).
    const shape = { capacity: CAPACITY, perSecond: 1 / 86_400, leaseTtl: '300ms' } as const;
    const policies = policiesOf(shape);
    const now = windowClock();
    const members = await Promise.all(
      Array.from({ length: N }, () =>
        ledgerMember({ url: server().url, policies, prefix: 'rs:', timeoutMs: 100, now }),
      ),
    );
    expect(await fleetCounted(members, N)).toEqual(members.map(() => N));
    const targetsOf = (policy: string) => KEYS.map((key) => ({ policy, key }));
    const targets = LEASED_ALGORITHMS.flatMap((a) => targetsOf(a.algorithm));
    const firstSights = LEASED_ALGORITHMS.map((a) => ({ policy: a.algorithm, key: 'first-sight' }));

    const problems: string[] = [];
    // Every instance asks for every key about every 3 ms: each turn's syncs share a batch.
    const load = traffic(members, targets, problems, 3);
    await delay(300);
    // Frozen first, so that batches are surely in flight when it dies: they never run.
    const killedAt = Date.now();
    process.kill(server().pid, 'SIGSTOP');
    // Every instance spends what an allowance can hold of every key: the reports go out in
    // batches to the frozen process. And a key every instance sees for the first time: a bucket
    // admits it at once, its sync sent in a batch.
    await burst(
      members,
      [...targets, ...firstSights],
      (t) => (t.key === 'first-sight' ? 1 : algorithmOf(t).share(CAPACITY, N) + 1),
      problems,
    );
    await delay(150);
    await server().kill();
    await delay(300);
    await server().restart();
    const admin = trackClient(new Redis(server().url));
    await delay(500);
    // Scripts flushed three times while the traffic's batches keep coming: each NOSCRIPT is
    // answered by one EVAL of the batch.
    for (let i = 0; i < 3; i++) {
      await admin.script('FLUSH');
      await delay(150);
    }
    await delay(300);
    await load.stop();
    await Promise.all(members.map((m) => m.limiter.close()));

    expect(problems, 'no decision rejects or hangs').toEqual([]);
    const fallback = members.reduce((sum, m) => sum + (m.sources.get('fallback') ?? 0), 0);
    const fromStore = members.reduce((sum, m) => sum + (m.sources.get('store') ?? 0), 0);
    expect(fallback, 'the fail policy answered while Redis was down').toBeGreaterThan(0);
    expect(await commandCalls(admin, 'eval'), 'batches re-sent with EVAL after NOSCRIPT').toBeGreaterThan(0);

    const entries = members.flatMap((m) => m.ledger.entries);
    const report: string[] = [];
    for (const algorithm of LEASED_ALGORITHMS) {
      const name = algorithm.name;
      const inFlightAtKill = entries.filter(
        (e) => e.outcome === 'unknown' && e.at >= killedAt && e.script === algorithm.syncScript,
      );
      const lostReports = inFlightAtKill.filter((e) => (e.req as { used: number }).used > 0);
      expect(lostReports.length, `${name}: reports were in flight when Redis was killed`).toBeGreaterThan(0);
      // Each lost for good: at most one allowance's usage each.
      const share = algorithm.share(CAPACITY, N);
      const mostLost = Math.max(...lostReports.map((e) => (e.req as { used: number }).used));
      expect(mostLost, `${name}: a lost report carried at most one allowance`).toBeLessThanOrEqual(share);
      report.push(
        `${name}: ${inFlightAtKill.length} syncs unanswered at the kill, ${lostReports.length} carrying usage (at most ${mostLost}, one allowance ${share})`,
      );
      for (const target of targetsOf(algorithm.algorithm)) {
        const key = storageKeyOf(target);
        const charged = await algorithm.charged(admin, members[0]!.store.redisKey(key), CAPACITY, now());
        // The new process started empty: only calls made since the freeze can have charged it, and
        // those sent to the frozen process never ran. Tokens granted before and handed back since
        // may find the count at zero (the level at the burst) and change nothing.
        const { least, most } = callsCharge(entries, key, killedAt);
        const slack = handBackSlack(
          members.map((m) => m.ledger),
          key,
          killedAt,
        );
        const label = `${name} ${target.key}`;
        expect(
          charged,
          `${label}: charged at most what the calls since the crash explain`,
        ).toBeLessThanOrEqual(most + slack + 0.01);
        expect(charged, `${label}: charged at least what their answers said`).toBeGreaterThanOrEqual(
          least - 0.01,
        );
        if (target.key === KEYS[0])
          report.push(
            `  ${target.key}: charged ${charged.toFixed(0)}, calls explain ${least.toFixed(0)}..${most.toFixed(0)} (+${slack.toFixed(0)} handed back from before)`,
          );
      }
    }
    expect(await keysWithoutTtl(admin), 'every key has a TTL').toEqual([]);
    console.log(
      `restart + SCRIPT FLUSH: ${fallback} decisions by the fail policy, ${fromStore} waited for the store, ` +
        `${entries.length} store calls\n${report.join('\n')}`,
    );
    await Promise.all(members.map((m) => m.store.close()));
  });
});
