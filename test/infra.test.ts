import { Redis } from 'ioredis';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { closeAllClients, clusterClient, redisClient, trackClient, uniquePrefix } from './support/clients.js';
import { startRedis } from './support/redisServer.js';

afterAll(closeAllClients);

describe('shared redis fixtures', () => {
  it('single node answers PING', async () => {
    expect(await redisClient().ping()).toBe('PONG');
  });

  it('cluster client reads and writes keys on every master', async () => {
    const cluster = clusterClient();
    const prefix = uniquePrefix('infra');
    const slots = await cluster.cluster('SLOTS');
    // Each entry is [firstSlot, lastSlot, [masterHost, masterPort, ...], ...replicas].
    const ownerOf = (slot: number) => slots.find(([lo, hi]) => slot >= lo && slot <= hi)?.[2]?.[1];

    // Probe hash tags until each master owns one of our keys.
    const keyByPort = new Map<number, string>();
    for (let i = 0; keyByPort.size < 3 && i < 1000; i++) {
      const key = `${prefix}{tag${i}}`;
      const owner = ownerOf(Number(await cluster.cluster('KEYSLOT', key)));
      if (owner !== undefined && !keyByPort.has(owner)) keyByPort.set(owner, key);
    }
    expect([...keyByPort.keys()].sort()).toEqual(
      inject('clusterNodes')
        .map((n) => n.port)
        .sort(),
    );

    for (const [port, key] of keyByPort) {
      // PX because global teardown fails the run on any key without a TTL.
      expect(await cluster.set(key, `v@${port}`, 'PX', 60_000)).toBe('OK');
      expect(await cluster.get(key)).toBe(`v@${port}`);
      // Read straight from the owning node to prove the key really lives there.
      const direct = trackClient(new Redis({ host: '127.0.0.1', port }));
      expect(await direct.get(key)).toBe(`v@${port}`);
    }
  });
});

describe('startRedis', () => {
  it('survives kill and restart on the same port', async () => {
    const server = await startRedis();
    try {
      // Fail commands immediately instead of queueing them while reconnecting.
      const fastFail = {
        lazyConnect: true,
        maxRetriesPerRequest: 0,
        enableOfflineQueue: false,
        retryStrategy: () => null,
      };
      const before = trackClient(new Redis(server.port, server.host, fastFail));
      before.on('error', () => {}); // the connection reset from kill() is expected
      await before.connect();
      expect(await before.set('k', 'v', 'PX', 60_000)).toBe('OK');
      const oldPid = server.pid;

      await server.kill();
      await expect(before.get('k')).rejects.toThrow();

      await server.restart();
      expect(server.pid).not.toBe(oldPid);
      const after = trackClient(new Redis(server.url, fastFail));
      await after.connect();
      expect(await after.ping()).toBe('PONG');
      // --save '' means a crash loses everything, like a real cache node without persistence.
      expect(await after.get('k')).toBeNull();
    } finally {
      await server.stop();
    }
    const probe = trackClient(
      new Redis(server.port, server.host, { lazyConnect: true, retryStrategy: () => null }),
    );
    probe.on('error', () => {});
    await expect(probe.connect()).rejects.toThrow();
  });
});
