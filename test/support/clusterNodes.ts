import { Redis } from 'ioredis';
import { trackClient } from './clients.js';
import type { RedisClusterProcess, RedisProcess } from './redisServer.js';

/** A connection to one node that gives up at once when the node is down. */
export function nodeClient(port: number): Redis {
  const client = trackClient(new Redis({ host: '127.0.0.1', port, retryStrategy: () => null }));
  client.on('error', () => {});
  return client;
}

/** The master serving `key`, asked of a node that is alive (undefined while the slot is unserved). */
export async function masterOf(
  cluster: RedisClusterProcess,
  key: string,
  ask: RedisProcess,
): Promise<RedisProcess | undefined> {
  const admin = nodeClient(ask.port);
  try {
    const slot = Number(await admin.cluster('KEYSLOT', key));
    const slots = await admin.cluster('SLOTS');
    const port = slots.find(([lo, hi]) => slot >= lo && slot <= hi)?.[2]?.[1];
    return cluster.nodes.find((n) => n.port === port);
  } finally {
    admin.disconnect();
  }
}
