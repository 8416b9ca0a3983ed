/**
 * A Redis Cluster master fails over while batches of write-behind reports and leases are in flight
 * to it, for the token bucket and both windows at once: it is frozen with calls in its socket, its
 * replica is promoted, and it is killed. No decision hangs or rejects, keys on the other masters
 * keep their leases, every key keeps a TTL, each report lost with the old master carried at most
 * one allowance (docs/architecture.md "Guarantees"), and no key holds more than the calls made explain (`LedgerStore`): nothing sent to the old
 * master is replayed on the new one, nothing runs twice. (The promoted replica may lack the last
 * writes the old master acknowledged: replication is asynchronous, so only the upper bound holds.)
 */
import { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeAllClients, trackClient } from '../support/clients.js';
import { masterOf, nodeClient } from '../support/clusterNodes.js';
import {
  algorithmOf,
  LEASED_ALGORITHMS,
  policiesOf,
  storageKeyOf,
  windowClock,
} from '../support/leasedAlgorithms.js';
import {
  burst,
  fleetCounted,
  keysWithoutTtl,
  ledgerMember,
  type Target,
  traffic,
} from '../support/ledgerFleet.js';
import { callsCharge } from '../support/ledgerStore.js';
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
    const CAPACITY = 1000;
    const N = 3;
    // No refill while the test runs and no window ending (the clock); the default fail policy.
    const shape = { capacity: CAPACITY, perSecond: 1 / 86_400, leaseTtl: '300ms' } as const;
    const policies = policiesOf(shape);
    // Healthy masters keep serving while one fails over (docs/operations.md).
    for (const node of cluster.nodes) {
      await nodeClient(node.port).config('SET', 'cluster-require-full-coverage', 'no');
    }
    const now = windowClock();
    const members = await Promise.all(
      Array.from({ length: N }, () => {
        const client = trackClient(new Cluster(cluster.startupNodes));
        return ledgerMember({ url: client, policies, prefix: 'wf:', timeoutMs: 150, now });
      }),
    );
    const id = storageKeyOf;
    const redisKey = (t: Target) => members[0]!.store.redisKey(id(t));
    const survivor = cluster.nodes[0]!;
    const victim = (await masterOf(cluster, redisKey({ policy: 'token-bucket', key: 'k0' }), survivor))!;
    const ask = cluster.nodes.find((n) => n !== victim)!;
    const isOnVictim = async (t: Target) => (await masterOf(cluster, redisKey(t), ask)) === victim;
    // Of every algorithm, three keys on the victim and three elsewhere, and a key on the victim
    // no instance has seen yet.
    const onVictim: Target[] = [];
    const elsewhere: Target[] = [];
    const firstSights: Target[] = [];
    for (const { algorithm } of LEASED_ALGORITHMS) {
      const mine = (list: Target[]) => list.filter((t) => t.policy === algorithm).length;
      for (let i = 0; mine(onVictim) < 3 || mine(elsewhere) < 3; i++) {
        const t = { policy: algorithm, key: `k${i}` };
        const list = (await isOnVictim(t)) ? onVictim : elsewhere;
        if (mine(list) < 3) list.push(t);
      }
      for (let i = 0; mine(firstSights) < 1; i++) {
        const t = { policy: algorithm, key: `new-${i}` };
        if (await isOnVictim(t)) firstSights.push(t);
      }
    }
    const targets = [...onVictim, ...elsewhere];
    expect(await fleetCounted(members, N)).toEqual(members.map(() => N));

    const problems: string[] = [];
    const load = traffic(members, targets, problems, 3);
    await delay(300);
    const frozenAt = Date.now();
    process.kill(victim.pid, 'SIGSTOP');
    let promoted: RedisProcess | undefined;
    try {
      // Every instance spends what an allowance can hold of every key on the victim, and sees a
      // key on it for the first time: their syncs go out in batches to the frozen master.
      await burst(
        members,
        [...firstSights, ...onVictim],
        (t) => (firstSights.includes(t) ? 1 : algorithmOf(t).share(CAPACITY, N) + 1),
        problems,
      );
      // The replica takes over once the other masters agree the victim failed (node timeout 2 s).
      for (let i = 0; i < 150 && (promoted === undefined || promoted === victim); i++) {
        await delay(100);
        promoted = await masterOf(cluster, redisKey(onVictim[0]!), ask).catch(() => undefined);
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
    const report: string[] = [];
    for (const algorithm of LEASED_ALGORITHMS) {
      const name = algorithm.name;
      const mine = (list: Target[]) => new Set(list.filter((t) => t.policy === algorithm.algorithm).map(id));
      const victimIds = mine([...onVictim, ...firstSights]);
      // A call sent just before the freeze is stuck in the frozen master's socket as well: the
      // instance's next sync waits for it (one at a time per key), so on a loaded machine it can be
      // the only one. Before the freeze, calls were answered (150 ms timeout, a healthy master).
      const inFlight = entries.filter(
        (e) => victimIds.has(e.key) && e.outcome === 'unknown' && e.at >= frozenAt - 150 && e.at < promotedAt,
      );
      expect(inFlight.length, `${name}: calls to the frozen master went unanswered`).toBeGreaterThan(0);
      // They never ran (the master was killed frozen): each lost report, at most one allowance.
      const lost = inFlight
        .filter((e) => e.script === algorithm.syncScript)
        .map((e) => (e.req as { used: number }).used);
      const share = algorithm.share(CAPACITY, N);
      expect(Math.max(...lost), `${name}: a lost report carried at most one allowance`).toBeLessThanOrEqual(
        share,
      );
      const servedAfter = entries.filter(
        (e) => victimIds.has(e.key) && e.outcome === 'ok' && e.at > promotedAt,
      ).length;
      expect(servedAfter, `${name}: the promoted master serves the victim’s keys`).toBeGreaterThan(0);
      for (const target of [...targets, ...firstSights].filter((t) => t.policy === algorithm.algorithm)) {
        const master = (await masterOf(cluster, redisKey(target), ask))!;
        const charged = await algorithm.charged(nodeClient(master.port), redisKey(target), CAPACITY, now());
        const { most } = callsCharge(entries, id(target));
        expect(charged, `${name} ${target.key}: charged at most what the calls explain`).toBeLessThanOrEqual(
          most + 0.01,
        );
      }
      report.push(
        `${name}: ${inFlight.length} calls to the frozen master unanswered (reports lost: at most ${Math.max(0, ...lost)} usage, one allowance ${share}), ${servedAfter} answered by the promoted one`,
      );
    }
    const masters = new Set(
      await Promise.all([...targets, ...firstSights].map((t) => masterOf(cluster, redisKey(t), ask))),
    );
    for (const master of masters) {
      expect(await keysWithoutTtl(nodeClient(master!.port)), `keys without TTL on ${master!.port}`).toEqual(
        [],
      );
    }
    const fallback = members.reduce((sum, m) => sum + (m.sources.get('fallback') ?? 0), 0);
    console.log(
      `failover with write-behind: promoted ${promotedAt - frozenAt} ms after the freeze; ${fallback} decisions by the fail policy\n${report.join('\n')}`,
    );
    await Promise.all(members.map((m) => m.store.close()));
  });
});
