/**
 * One Cluster master stops answering (`CLIENT PAUSE … WRITE` holds every script call) while a
 * turn brings many new keys spread over all masters. Before batch slots were per connection, the
 * paused master's batches took every one of the 16 slots, so the other masters' calls queued
 * behind calls that would not be answered, failed at their deadline and opened those masters'
 * breakers: their keys were decided by the fail policy though their masters were healthy.
 */
import { Cluster } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type Decision, Limiter, RedisStore } from '../../src/index.js';
import { storageKey } from '../../src/stores/keys.js';
import { keySlot } from '../../src/stores/slot.js';
import { closeAllClients, trackClient } from '../support/clients.js';
import { nodeClient } from '../support/clusterNodes.js';
import { type RedisClusterProcess, startCluster } from '../support/redisServer.js';

const delay = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

const KEYS = 600;
const PAUSE_MS = 1500;

let cluster: RedisClusterProcess;
beforeAll(async () => {
  cluster = await startCluster({ masters: 3 });
});
afterAll(async () => {
  await closeAllClients();
  await cluster.stop();
});

it('the healthy masters keep answering their own keys while one master holds its calls', async () => {
  const prefix = 'pm:';
  const client = trackClient(new Cluster(cluster.startupNodes));
  client.on('error', () => {});
  const store = new RedisStore({ client, prefix });
  await store.ready();
  const limiter = new Limiter({ store, policies: { p: { algorithm: 'token-bucket', rate: 1000 } } });
  // Which master serves each slot, as the cluster says.
  const ranges = await nodeClient(cluster.nodes[0]!.port).cluster('SLOTS');
  const portOf = (key: string) => {
    const slot = keySlot(store.redisKey(storageKey('token-bucket', 'p', key)));
    return ranges.find(([lo, hi]) => slot >= lo && slot <= hi)![2]![1] as number;
  };
  const victim = cluster.nodes[0]!.port;
  // Warm the connection to every master, and the scripts, on keys of their own.
  await Promise.all(Array.from({ length: 30 }, (_, i) => limiter.consume('p', `warm-${i}`)));
  await nodeClient(victim).client('PAUSE', PAUSE_MS, 'WRITE');
  const keys = Array.from({ length: KEYS }, (_, i) => `new-${i}`);
  const decisions: Decision[] = await Promise.all(keys.map((k) => limiter.consume('p', k)));
  const healthy = keys.flatMap((k, i) => (portOf(k) === victim ? [] : [decisions[i]!]));
  expect(healthy.length).toBeGreaterThan(KEYS / 2);
  expect(
    healthy.filter((d) => d.source === 'fallback').length,
    'healthy masters answered by the fail policy',
  ).toBe(0);
  await delay(PAUSE_MS + 200);
  await limiter.close();
  await store.close();
}, 30_000);
