import { afterAll, describe, expect, it } from 'vitest';
import { Limiter, RedisStore } from '../../src/index.js';
import { luaScript } from '../../src/scripts.js';
import { closeAllClients, redisClient, uniquePrefix } from '../support/clients.js';

afterAll(closeAllClients);

describe('Lua scripts on Redis', () => {
  it('have the sha SCRIPT LOAD computes', async () => {
    const client = redisClient();
    for (const name of ['token_bucket_acquire', 'token_bucket_release']) {
      const script = luaScript(name);
      expect(await client.script('LOAD', script.source), name).toBe(script.sha);
    }
  });

  it('reload transparently after SCRIPT FLUSH, mid-traffic', async () => {
    const client = redisClient();
    // A generous timeout: this test is about NOSCRIPT, not latency on a loaded CI machine.
    const store = new RedisStore({ client, prefix: uniquePrefix('flush'), timeoutMs: 2000 });
    await store.ready();
    const l = new Limiter({
      store,
      policies: { p: { algorithm: 'token-bucket', rate: 1000, lease: 'exact' } },
    });
    let allowed = 0;
    for (let i = 0; i < 50; i++) {
      if (i % 10 === 5) await client.script('FLUSH');
      if ((await l.consume('p', 'k')).allowed) allowed++;
    }
    expect(allowed).toBe(50);
    await l.close();
    await store.close();
  });

  it('reject invalid arguments without writing anything', async () => {
    const client = redisClient();
    const { sha } = luaScript('token_bucket_acquire');
    const key = `${uniquePrefix('bad')}k`;
    for (const args of [
      ['0', '1000', '10', '1', '1', '0', ''],
      ['nan', '1000', '10', '1', '1', '0', ''],
      ['10', '1000', 'inf', '1', '1', '0', ''],
      ['10', '1000', '10', '-1', '1', '0', ''],
      ['10', '1000', '10', '1', '1', '0', 'yesterday'],
    ]) {
      await expect(client.evalsha(sha, 1, key, ...args).catch((e: Error) => e.message)).resolves.toMatch(
        /tokenlease: invalid/,
      );
    }
    await client.script('LOAD', luaScript('token_bucket_acquire').source);
    expect(await client.exists(key)).toBe(0);
  });
});
