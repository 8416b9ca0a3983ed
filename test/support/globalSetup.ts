import { Redis } from 'ioredis';
import type { TestProject } from 'vitest/node';
import {
  ensureRedisInstalled,
  type RedisClusterProcess,
  type RedisProcess,
  startCluster,
  startRedis,
} from './redisServer.js';

declare module 'vitest' {
  export interface ProvidedContext {
    redisUrl: string;
    redisHost: string;
    redisPort: number;
    clusterNodes: { host: string; port: number }[];
  }
}

let single: RedisProcess | undefined;
let cluster: RedisClusterProcess | undefined;

export async function setup({ provide }: Pick<TestProject, 'provide'>): Promise<void> {
  ensureRedisInstalled();
  try {
    [single, cluster] = await Promise.all([startRedis(), startCluster({ masters: 3, replicasPerMaster: 0 })]);
  } catch (err) {
    // One of the two may have started; don't leave it running even if vitest skips teardown.
    await teardownProcesses();
    throw err;
  }
  provide('redisUrl', single.url);
  provide('redisHost', single.host);
  provide('redisPort', single.port);
  provide('clusterNodes', cluster.startupNodes);
}

/** Keys without a TTL would leak forever in production; the library must never create one. */
async function keysWithoutTtl(port: number): Promise<string[]> {
  const c = new Redis({
    host: '127.0.0.1',
    port,
    lazyConnect: true,
    maxRetriesPerRequest: 1,
    disconnectTimeout: 50,
  });
  c.on('error', () => {});
  try {
    await c.connect();
    // Replicas hold copies of their master's keys; scanning masters only avoids duplicate reports.
    const role = (await c.call('ROLE')) as [string, ...unknown[]];
    if (role[0] !== 'master') return [];
    const offenders: string[] = [];
    let cursor = '0';
    do {
      const [next, keys] = await c.scanBuffer(cursor, 'COUNT', 1000);
      cursor = next.toString();
      if (keys.length === 0) continue;
      const pipeline = c.pipeline();
      for (const key of keys) pipeline.pttl(key);
      const results = (await pipeline.exec()) ?? [];
      keys.forEach((key, i) => {
        if (results[i]?.[1] === -1) offenders.push(`${port}:${key.toString()}`);
      });
    } while (cursor !== '0');
    return offenders;
  } finally {
    c.disconnect();
  }
}

async function teardownProcesses(): Promise<void> {
  await Promise.allSettled([single?.stop(), cluster?.stop()]);
  single = undefined;
  cluster = undefined;
}

export async function teardown(): Promise<void> {
  try {
    const ports = [single?.port, ...(cluster?.nodes.map((n) => n.port) ?? [])].filter(
      (p): p is number => p !== undefined,
    );
    const offenders = (await Promise.all(ports.map(keysWithoutTtl))).flat();
    if (offenders.length > 0) {
      // vitest only logs errors thrown from global teardown, so force a failing exit code as well.
      process.exitCode = 1;
      throw new Error(
        `${offenders.length} Redis key(s) have no TTL (PTTL = -1); every key must expire:\n  ` +
          offenders.slice(0, 20).join('\n  '),
      );
    }
  } finally {
    await teardownProcesses();
  }
}
