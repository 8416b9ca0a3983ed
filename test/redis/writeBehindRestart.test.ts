/**
 * Redis restarting without persistence (kill -9, a new process on the same port) and `SCRIPT FLUSH`,
 * both while batches of write-behind reports and leases are in flight, on a redis-server this file
 * starts. No decision hangs or rejects, every key keeps a TTL, and the state the new process holds
 * is what the calls made since the crash explain (`LedgerStore`): no call from before the crash is
 * replayed, and none runs twice after a NOSCRIPT.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { storageKey } from '../../src/stores/keys.js';
import { storedLevel } from '../support/bucketState.js';
import { closeAllClients, trackClient } from '../support/clients.js';
import {
  consumeCounted,
  fleetCounted,
  keysWithoutTtl,
  ledgerMember,
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

async function commandCalls(admin: Redis, command: string): Promise<number> {
  const info = await admin.info('commandstats');
  return Number(new RegExp(`^cmdstat_${command}:calls=(\\d+)`, 'm').exec(info)?.[1] ?? 0);
}

describe('write-behind across a Redis restart and SCRIPT FLUSH', () => {
  it('batches in flight at a kill -9 and at SCRIPT FLUSH: nothing hangs, rejects, leaks or runs twice', async () => {
    const BURST = 1000;
    const N = 4;
    const KEYS = Array.from({ length: 12 }, (_, i) => `k${i}`);
    // No refill while the test runs; the default fail policy ('local') answers while Redis is down,
    // and writes back what it admitted once it is back (token_bucket_debit, in the ledger too).
    const policies = {
      p: {
        algorithm: 'token-bucket' as const,
        rate: 1,
        period: '1d' as const,
        burst: BURST,
        lease: { ttl: '300ms' as const },
      },
    };
    const members = await Promise.all(
      Array.from({ length: N }, () =>
        ledgerMember({ url: server.url, policies, prefix: 'rs:', timeoutMs: 100 }),
      ),
    );
    expect(await fleetCounted(members, N)).toEqual(members.map(() => N));

    const problems: string[] = [];
    // Every instance asks for every key about every 3 ms: each turn's syncs share a batch.
    const load = traffic(members, KEYS, problems, 3);
    await delay(300);
    // Frozen first, so that batches are surely in flight when it dies: they never run.
    const killedAt = Date.now();
    process.kill(server.pid, 'SIGSTOP');
    // A key every instance sees for the first time: admitted at once, its sync sent in a batch.
    await Promise.all(members.map((m) => consumeCounted(m, 'first-sight', problems)));
    await delay(150);
    await server.kill();
    await delay(300);
    await server.restart();
    const admin = trackClient(new Redis(server.url));
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
    const inFlightAtKill = entries.filter(
      (e) => e.outcome === 'unknown' && e.at >= killedAt && e.script.startsWith('token_bucket'),
    ).length;
    expect(inFlightAtKill, 'batches were in flight when Redis was killed').toBeGreaterThan(0);
    const report: string[] = [];
    for (const key of KEYS) {
      const id = storageKey('token-bucket', 'p', key);
      const charged = BURST - (await storedLevel(admin, members[0]!.store.redisKey(id), BURST));
      // The new process started empty: only calls made since the freeze can have charged it, and
      // those sent to the frozen process never ran.
      const { least, most } = bucketCharge(entries, id, killedAt);
      expect(charged, `${key}: charged at most what the calls since the crash explain`).toBeLessThanOrEqual(
        most + 0.01,
      );
      expect(charged, `${key}: charged at least what their answers said`).toBeGreaterThanOrEqual(
        least - 0.01,
      );
      if (report.length < 3)
        report.push(
          `${key}: charged ${charged.toFixed(0)}, calls explain ${least.toFixed(0)}..${most.toFixed(0)}`,
        );
    }
    expect(await keysWithoutTtl(admin), 'every key has a TTL').toEqual([]);
    console.log(
      `restart + SCRIPT FLUSH: ${fallback} decisions by the fail policy, ${fromStore} waited for the store, ` +
        `${entries.length} store calls, ${inFlightAtKill} unanswered at the kill; ${report.join('; ')}`,
    );
    await Promise.all(members.map((m) => m.store.close()));
  });
});
