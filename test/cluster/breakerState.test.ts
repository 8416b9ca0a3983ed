import { Cluster } from 'ioredis';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type Decision, Limiter, RedisStore } from '../../src/index.js';
import { prometheusObserver } from '../../src/observe/prometheus.js';
import { storageKey } from '../../src/stores/keys.js';
import { closeAllClients, trackClient } from '../support/clients.js';
import { masterOf, nodeClient } from '../support/clusterNodes.js';
import { type RedisClusterProcess, type RedisProcess, startCluster } from '../support/redisServer.js';

const delay = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

let cluster: RedisClusterProcess;
beforeAll(async () => {
  cluster = await startCluster({ masters: 3, replicasPerMaster: 1 });
  for (const node of cluster.nodes) {
    await nodeClient(node.port).config('SET', 'cluster-require-full-coverage', 'no');
  }
});
afterAll(async () => {
  await closeAllClients();
  await cluster.stop();
});

async function breakerGauge(registry: Registry): Promise<string[]> {
  const text = await registry.metrics();
  return text.split('\n').filter((line) => line.startsWith('tokenlease_breaker_state{'));
}

it('after a master failover the breaker state and gauge return to closed (issue 13 item 7)', async () => {
  const prefix = 'bs:';
  const hot = 'hot';
  const hotKey = prefix + storageKey('token-bucket', 'p', hot);
  const client = trackClient(new Cluster(cluster.startupNodes));
  client.on('error', () => {});
  const store = new RedisStore({ client, timeoutMs: 250, prefix });
  await store.ready();
  const registry = new Registry();
  const limiter = new Limiter({
    store,
    policies: { p: { algorithm: 'token-bucket', rate: 200 } },
    observers: [prometheusObserver({ registry })],
  });
  const victim = (await masterOf(cluster, hotKey, cluster.nodes[0]!))!;
  const survivor = cluster.nodes.find((n) => n !== victim)!;

  const decisions: { at: number; decision: Decision }[] = [];
  let running = true;
  const traffic = async () => {
    while (running) {
      decisions.push({ at: Date.now(), decision: await limiter.consume('p', hot) });
      await delay(5);
    }
  };
  let flow = traffic();
  await delay(200);
  await victim.kill();
  // Traffic until the victim's breaker opens, then none while the replica is promoted: the
  // breaker of the dead master sees no call after that.
  while (limiter.stats().breaker !== 'open') await delay(10);
  running = false;
  await flow;
  let promoted: RedisProcess | undefined;
  for (let i = 0; i < 150 && (!promoted || promoted === victim); i++) {
    await delay(100);
    promoted = await masterOf(cluster, hotKey, survivor).catch(() => undefined);
  }
  expect(promoted, 'a replica was promoted').not.toBe(victim);
  const promotedAt = Date.now();
  running = true;
  flow = traffic();
  const served = () => {
    const latest = decisions.filter((d) => d.at > promotedAt).slice(-20);
    return latest.length === 20 && latest.every((d) => d.decision.source !== 'fallback');
  };
  for (let i = 0; i < 200 && !served(); i++) await delay(25);
  running = false;
  await flow;
  expect(served(), 'leasing resumed on the promoted replica').toBe(true);

  // No traffic from here on: what the breaker reports must follow the cluster by itself.
  const recoveredAt = Date.now();
  while (limiter.stats().breaker !== 'closed' && Date.now() - recoveredAt < 3000) await delay(20);
  const closedAfter = Date.now() - recoveredAt;
  console.log(
    `breaker state ${limiter.stats().breaker} ${closedAfter} ms after leasing resumed on the promoted replica`,
  );
  expect(limiter.stats().breaker, `stats().breaker ${closedAfter} ms after recovery`).toBe('closed');
  expect(await breakerGauge(registry)).toEqual([
    'tokenlease_breaker_state{state="closed"} 1',
    'tokenlease_breaker_state{state="open"} 0',
    'tokenlease_breaker_state{state="half-open"} 0',
  ]);
  await limiter.close();
  await store.close();
});
