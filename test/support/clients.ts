import { randomUUID } from 'node:crypto';
import { Cluster, type ClusterOptions, Redis, type RedisOptions } from 'ioredis';
import { inject } from 'vitest';

type Client = Redis | Cluster;

const clients = new Set<Client>();

/** Registers a client (e.g. one connected to a private startRedis() server) for closeAllClients(). */
export function trackClient<T extends Client>(client: T): T {
  clients.add(client);
  return client;
}

/** A client for the shared single-node server started by globalSetup. */
export function redisClient(opts: RedisOptions = {}): Redis {
  return trackClient(new Redis(inject('redisUrl'), opts));
}

/** A cluster client for the shared 3-master cluster started by globalSetup. */
export function clusterClient(opts: ClusterOptions = {}): Cluster {
  return trackClient(new Cluster(inject('clusterNodes'), opts));
}

/**
 * The servers are shared by all test files running in parallel and are never flushed, so every
 * test namespaces its keys with a prefix from here.
 */
export function uniquePrefix(label = 'test'): string {
  return `t:${label}:${randomUUID().slice(0, 8)}:`;
}

export async function closeAllClients(): Promise<void> {
  const all = [...clients];
  clients.clear();
  await Promise.all(
    all.map(async (c) => {
      // quit() waits for pending replies, but would hang on a client whose server was killed
      // (it queues while reconnecting), so bound it and hard-disconnect regardless.
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        c.quit().catch(() => {}),
        new Promise((resolve) => {
          timer = setTimeout(resolve, 1_000);
        }),
      ]);
      clearTimeout(timer);
      c.disconnect();
    }),
  );
}
