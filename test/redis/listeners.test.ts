import { afterAll, describe, expect, it } from 'vitest';
import { RedisStore } from '../../src/index.js';
import { closeAllClients, redisClient, uniquePrefix } from '../support/clients.js';

afterAll(closeAllClients);

describe('a RedisStore on a client it does not own', () => {
  it('leaves no listeners behind on close(), however many stores share the client', async () => {
    const client = redisClient({ enableOfflineQueue: false, autoResendUnfulfilledCommands: false });
    if (client.status !== 'ready') await new Promise((resolve) => client.once('ready', resolve));
    const before = ['ready', 'close', 'error'].map((e) => client.listenerCount(e));
    for (let i = 0; i < 20; i++) {
      const store = new RedisStore({ client, prefix: uniquePrefix('listeners') });
      expect(store.client, 'the safe client is used as it is').toBe(client);
      await store.close();
    }
    expect(['ready', 'close', 'error'].map((e) => client.listenerCount(e))).toEqual(before);
  });
});
