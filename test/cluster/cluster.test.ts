import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { type Decision, Limiter, RedisStore } from '../../src/index.js';
import { storageKey } from '../../src/stores/keys.js';
import { storedLevel } from '../support/bucketState.js';
import { closeAllClients, clusterClient, trackClient, uniquePrefix } from '../support/clients.js';

afterAll(closeAllClients);

const delay = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

function nodeClient(port: number): Redis {
  return trackClient(new Redis({ host: '127.0.0.1', port }));
}

async function commandCalls(node: Redis, command: string): Promise<number> {
  const info = await node.info('commandstats');
  return Number(new RegExp(`^cmdstat_${command}:calls=(\\d+)`, 'm').exec(info)?.[1] ?? 0);
}

describe('RedisStore on a Redis Cluster', () => {
  it('runs every script on one slot, for any key, on a safe duplicate of the cluster client', async () => {
    const store = new RedisStore({
      client: clusterClient(),
      prefix: uniquePrefix('cluster'),
      timeoutMs: 1000,
    });
    await store.ready();
    const options = store.client.options as {
      enableOfflineQueue?: boolean;
      retryDelayOnFailover?: number;
      enableReadyCheck?: boolean;
    };
    expect(options).toMatchObject({
      enableOfflineQueue: false,
      retryDelayOnFailover: 0,
      enableReadyCheck: false,
    });
    const limiter = new Limiter({
      store,
      policies: {
        p: { algorithm: 'token-bucket', rate: 100 },
        exact: { algorithm: 'token-bucket', rate: 100, lease: 'exact' },
      },
    });
    const keys = ['', '{}', '}{', '{a}{b}', 'ключ 🔑', 'x'.repeat(10_240), '\udc00', ...Array(40).keys()];
    const decisions: Decision[] = [];
    for (const key of keys.map(String)) {
      decisions.push(await limiter.consume('p', key));
      decisions.push(
        await limiter.consume([
          { policy: 'p', key },
          { policy: 'exact', key: `${key}!` },
        ]),
      );
    }
    expect(decisions.filter((d) => !d.allowed || d.source === 'fallback')).toEqual([]);
    expect(limiter.stats().storeErrors, 'no CROSSSLOT or any other error').toBe(0);
    await limiter.close();
    await store.close();
  });

  it('survives ASK and MOVED while the slot of a hot key migrates under traffic', async () => {
    const prefix = uniquePrefix('reshard');
    const key = `hot-${randomUUID()}`;
    const cluster = clusterClient();
    const probe = new RedisStore({ client: clusterClient(), prefix });
    const bucketKey = probe.redisKey(storageKey('token-bucket', 'p', key));
    await probe.close();
    const slot = Number(await cluster.cluster('KEYSLOT', bucketKey));
    const nodes = inject('clusterNodes').map((n) => ({ port: n.port, redis: nodeClient(n.port), id: '' }));
    for (const n of nodes) n.id = String(await n.redis.cluster('MYID'));
    const owner = async () => {
      const slots = await cluster.cluster('SLOTS');
      return slots.find(([lo, hi]) => slot >= lo && slot <= hi)?.[2]?.[1];
    };
    const sourcePort = await owner();
    const source = nodes.find((n) => n.port === sourcePort)!;
    const target = nodes.find((n) => n.port !== sourcePort)!;

    // Exact mode: every decision runs a script, so the traffic keeps hitting the migrating slot.
    const burst = 1_000_000; // refills 1000 a day: a hundredth of a token during the test
    const instances = Array.from({ length: 3 }, () => {
      const store = new RedisStore({ client: clusterClient(), prefix, timeoutMs: 1000 });
      const policies = {
        p: {
          algorithm: 'token-bucket' as const,
          rate: 1000,
          period: '1d' as const,
          burst,
          lease: 'exact' as const,
        },
      };
      return { store, limiter: new Limiter({ store, policies }) };
    });
    await Promise.all(instances.map((x) => x.store.ready()));
    const decisions: Decision[] = [];
    const errors: unknown[] = [];
    let running = true;
    const traffic = instances.map(async ({ limiter }) => {
      while (running) {
        await limiter.consume('p', key).then(
          (d) => decisions.push(d),
          (e: unknown) => errors.push(e),
        );
        // A decision made without I/O (e.g. by a fail policy) must not starve the timers below.
        await new Promise((resolve) => setImmediate(resolve));
      }
    });
    const asking0 = await commandCalls(target.redis, 'asking');

    await delay(100);
    await target.redis.cluster('SETSLOT', slot, 'IMPORTING', source.id);
    await source.redis.cluster('SETSLOT', slot, 'MIGRATING', target.id);
    await delay(100);
    for (;;) {
      const keys = (await source.redis.cluster('GETKEYSINSLOT', slot, 100)) as string[];
      if (keys.length === 0) break;
      await source.redis.migrate('127.0.0.1', target.port, '', 0, 5000, 'KEYS', ...keys);
    }
    await delay(200); // traffic follows ASK redirections to the target
    for (const n of [target, source, ...nodes.filter((x) => x !== source && x !== target)]) {
      await n.redis.cluster('SETSLOT', slot, 'NODE', target.id);
    }
    await delay(200); // and then MOVED, after which the clients update their slot maps

    running = false;
    await Promise.all(traffic);
    expect(errors).toEqual([]);
    expect(await owner(), 'the slot moved').toBe(target.port);
    expect(await commandCalls(target.redis, 'asking'), 'clients followed ASK').toBeGreaterThan(asking0);
    expect(decisions.filter((d) => !d.allowed || d.source !== 'store')).toEqual([]);
    // Every admitted request took exactly one token, wherever the key lived at the time.
    const level = await storedLevel(target.redis, bucketKey, burst);
    expect(Math.round(burst - level), 'no token lost or taken twice across the migration').toBe(
      decisions.length,
    );
    await Promise.all(instances.map((x) => x.limiter.close()));
    await Promise.all(instances.map((x) => x.store.close()));
  });
});
