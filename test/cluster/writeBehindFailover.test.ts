/**
 * A Redis Cluster master fails over while batches of write-behind reports and leases are in flight
 * to it: it is frozen with calls in its socket, its replica is promoted, and it is killed. No
 * decision hangs or rejects, keys on the other masters keep their leases, every key keeps a TTL,
 * and no bucket holds more than the calls made explain (`LedgerStore`): nothing sent to the old
 * master is replayed on the new one, nothing runs twice. (The promoted replica may lack the last
 * writes the old master acknowledged: replication is asynchronous, so only the upper bound holds.)
 */
import { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { storageKey } from '../../src/stores/keys.js';
import { storedLevel } from '../support/bucketState.js';
import { closeAllClients, trackClient } from '../support/clients.js';
import { masterOf, nodeClient } from '../support/clusterNodes.js';
import {
  consumeCounted,
  fleetCounted,
  keysWithoutTtl,
  ledgerMember,
  traffic,
} from '../support/ledgerFleet.js';
import { bucketCharge } from '../support/ledgerStore.js';
import { type RedisClusterProcess, type RedisProcess, startCluster } from '../support/redisServer.js';

const delay = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

let cluster: RedisClusterProcess;
beforeAll(async () => {
  cluster = await startCluster({ masters: 3, replicasPerMaster: 1 });
});
afterAll(async () => {
  await closeAllClients();
  await cluster.stop();
});

describe('write-behind through a Redis Cluster master failover', () => {
  it('batches in flight to a master that fails over: nothing hangs, rejects, leaks or runs twice', async () => {
    const BURST = 1000;
    const N = 3;
    const KEYS = Array.from({ length: 12 }, (_, i) => `k${i}`);
    const policies = {
      p: {
        algorithm: 'token-bucket' as const,
        rate: 1,
        period: '1d' as const,
        burst: BURST,
        lease: { ttl: '300ms' as const },
      },
    };
    // Healthy masters keep serving while one fails over (docs/operations.md).
    for (const node of cluster.nodes) {
      await nodeClient(node.port).config('SET', 'cluster-require-full-coverage', 'no');
    }
    const members = await Promise.all(
      Array.from({ length: N }, () => {
        const client = trackClient(new Cluster(cluster.startupNodes));
        return ledgerMember({ url: client, policies, prefix: 'wf:', timeoutMs: 150 });
      }),
    );
    const redisKey = (key: string) => members[0]!.store.redisKey(storageKey('token-bucket', 'p', key));
    const survivor = cluster.nodes[0]!;
    const victim = (await masterOf(cluster, redisKey(KEYS[0]!), survivor))!;
    const ask = cluster.nodes.find((n) => n !== victim)!;
    const onVictim: string[] = [];
    for (const key of KEYS) if ((await masterOf(cluster, redisKey(key), ask)) === victim) onVictim.push(key);
    let firstSight = '';
    for (let i = 0; !firstSight; i++) {
      if ((await masterOf(cluster, redisKey(`new-${i}`), ask)) === victim) firstSight = `new-${i}`;
    }
    onVictim.push(firstSight);
    expect(await fleetCounted(members, N)).toEqual(members.map(() => N));

    const problems: string[] = [];
    const load = traffic(members, KEYS, problems, 3);
    await delay(300);
    const frozenAt = Date.now();
    process.kill(victim.pid, 'SIGSTOP');
    let promoted: RedisProcess | undefined;
    try {
      // First sights of a key on the victim: their syncs go out in batches to the frozen master.
      await Promise.all(members.map((m) => consumeCounted(m, firstSight, problems)));
      // The replica takes over once the other masters agree the victim failed (node timeout 2 s).
      for (let i = 0; i < 150 && (promoted === undefined || promoted === victim); i++) {
        await delay(100);
        promoted = await masterOf(cluster, redisKey(KEYS[0]!), ask).catch(() => undefined);
      }
    } finally {
      await victim.kill();
    }
    expect(promoted, 'a replica was promoted').toBeDefined();
    expect(promoted).not.toBe(victim);
    // Traffic goes on until the promoted master answers for the victim's keys.
    const promotedAt = Date.now();
    await delay(1500);
    await load.stop();
    await Promise.all(members.map((m) => m.limiter.close()));

    expect(problems, 'no decision rejects or hangs').toEqual([]);
    const entries = members.flatMap((m) => m.ledger.entries);
    const onVictimIds = new Set(onVictim.map((key) => storageKey('token-bucket', 'p', key)));
    const inFlight = entries.filter(
      (e) => onVictimIds.has(e.key) && e.outcome === 'unknown' && e.at >= frozenAt && e.at < promotedAt,
    ).length;
    expect(inFlight, 'calls to the frozen master went unanswered').toBeGreaterThan(0);
    const servedAfter = entries.filter(
      (e) => onVictimIds.has(e.key) && e.outcome === 'ok' && e.at > promotedAt,
    ).length;
    expect(servedAfter, 'the promoted master serves the victim’s keys').toBeGreaterThan(0);

    const masters = [...new Set(await Promise.all(KEYS.map((key) => masterOf(cluster, redisKey(key), ask))))];
    for (const key of [...KEYS, firstSight]) {
      const master = (await masterOf(cluster, redisKey(key), ask))!;
      const charged = BURST - (await storedLevel(nodeClient(master.port), redisKey(key), BURST));
      const { most } = bucketCharge(entries, storageKey('token-bucket', 'p', key));
      expect(charged, `${key}: charged at most what the calls explain`).toBeLessThanOrEqual(most + 0.01);
    }
    for (const master of masters) {
      expect(await keysWithoutTtl(nodeClient(master!.port)), `keys without TTL on ${master!.port}`).toEqual(
        [],
      );
    }
    const fallback = members.reduce((sum, m) => sum + (m.sources.get('fallback') ?? 0), 0);
    console.log(
      `failover with write-behind: promoted ${promotedAt - frozenAt} ms after the freeze; ${inFlight} calls ` +
        `to the frozen master unanswered, ${servedAfter} answered by the promoted one; ${fallback} decisions by the fail policy`,
    );
    await Promise.all(members.map((m) => m.store.close()));
  });
});
