import { Redis } from 'ioredis';
import { afterAll, beforeAll } from 'vitest';
import { closeAllClients, trackClient } from './clients.js';
import { type RedisProcess, startRedis } from './redisServer.js';

/**
 * A redis-server of the calling test file's own, for faults that would disturb the shared one
 * (pauses, kills): started before the file's tests, stopped after them with every client.
 */
export function privateRedis(): { server: () => RedisProcess; client: () => Redis } {
  let server: RedisProcess | undefined;
  beforeAll(async () => {
    server = await startRedis();
  });
  afterAll(async () => {
    await closeAllClients();
    await server?.stop();
  });
  const running = () => {
    if (!server) throw new Error('privateRedis(): the server starts in beforeAll');
    return server;
  };
  return {
    server: running,
    /** A client with ioredis defaults, as an application has; it reports outages as 'error' events. */
    client: () => {
      const c = trackClient(new Redis(running().url));
      c.on('error', () => {});
      return c;
    },
  };
}
