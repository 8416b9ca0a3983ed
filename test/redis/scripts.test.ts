import { describe, expect, it } from 'vitest';
import { Limiter, RedisStore } from '../../src/index.js';
import { luaScript, operationNames } from '../../src/scripts.js';
import { tokenBucketAcquire } from '../../src/stores/tokenBucketOps.js';
import { storedLevel } from '../support/bucketState.js';
import { uniquePrefix } from '../support/clients.js';
import { privateRedis } from '../support/privateRedis.js';

// A server of this file's own: SCRIPT FLUSH on the shared one would make every file running
// beside it reload its scripts, slow enough on a loaded machine to time their calls out.
const { client: redisClient } = privateRedis();

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
    const { sha, source } = luaScript('token_bucket_acquire');
    await client.script('LOAD', source);
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
    expect(await client.exists(key)).toBe(0);
  });

  it('read a token bucket tokenlease 0.1 stored as a hash, and store it as a string with its expiry', async () => {
    const client = redisClient();
    const store = new RedisStore({ client, prefix: uniquePrefix('legacy'), timeoutMs: 2000 });
    await store.ready();
    const key = store.redisKey('bucket');
    // One token an hour: the level does not move while the test runs.
    const shape = { rate: 1, periodMs: 3_600_000, burst: 10 };
    await client.hset(key, 'l', '4', 't', String(Date.now()));
    await client.pexpire(key, 60_000);
    const grant = await store.run(tokenBucketAcquire, 'bucket', { ...shape, want: 3, min: 1, ahead: 0 });
    expect(grant.granted, 'the level 0.1 stored').toBe(3);
    expect(grant.levelBefore).toBeCloseTo(4, 3);
    expect(await client.type(key), 'rewritten in the new layout').toBe('string');
    expect(await storedLevel(client, key, shape.burst)).toBeCloseTo(1, 3);
    expect(await client.pttl(key), 'with an expiry').toBeGreaterThan(0);
    await store.close();
  });

  it('refuse a token bucket key something else wrote, and leave it alone', async () => {
    const client = redisClient();
    const store = new RedisStore({ client, prefix: uniquePrefix('garbage'), timeoutMs: 2000 });
    await store.ready();
    const key = store.redisKey('bucket');
    await client.set(key, 'not a bucket', 'PX', 60_000);
    const shape = { rate: 1, periodMs: 1000, burst: 10, want: 1, min: 1, ahead: 0 };
    await expect(store.run(tokenBucketAcquire, 'bucket', shape)).rejects.toThrow(/not a token bucket/);
    expect(await client.get(key)).toBe('not a bucket');
    await store.close();
  });

  it('the batch script has the sha SCRIPT LOAD computes and runs every operation, and only those', async () => {
    const client = redisClient();
    const batch = luaScript('batch');
    expect(await client.script('LOAD', batch.source)).toBe(batch.sha);
    const names = [...operationNames(), 'no_such_operation'];
    // Each with no arguments, on a key nothing else uses: every operation refuses them as its own.
    const key = `${uniquePrefix('dispatch')}k`;
    const replies = (await client.evalsha(
      batch.sha,
      names.length,
      ...names.map(() => key),
      ...names.flatMap((name) => [name, '0']),
    )) as [number, string][];
    expect(replies).toHaveLength(names.length);
    names.forEach((name, i) => {
      const [ok, reply] = replies[i]!;
      if (name === 'no_such_operation') {
        expect([ok, reply], name).toEqual([0, 'ERR tokenlease: unknown operation no_such_operation']);
      } else {
        expect(String(reply), name).not.toMatch(/unknown operation/);
      }
    });
    expect(await client.exists(key), 'nothing written for arguments refused').toBe(0);
  });

  it('a batch fails only its invalid operation, and writes nothing for it', async () => {
    const client = redisClient();
    const store = new RedisStore({ client, prefix: uniquePrefix('batch'), timeoutMs: 2000 });
    await store.ready();
    const good = { rate: 10, periodMs: 1000, burst: 10, want: 3, min: 1, ahead: 0 };
    const outcome = (call: Promise<{ granted: number }>) =>
      call.then(
        (r) => r.granted,
        (err: unknown) => String(err),
      );
    const [a, b, c] = await Promise.all([
      outcome(store.run(tokenBucketAcquire, 'a', good)),
      outcome(store.run(tokenBucketAcquire, 'b', { ...good, rate: 0 })),
      outcome(store.run(tokenBucketAcquire, 'c', good)),
    ]);
    expect(a, 'first call').toBe(3);
    expect(b, 'invalid call').toMatch(/invalid rate/);
    expect(c, 'last call').toBe(3);
    expect(await client.exists(store.redisKey('b')), 'nothing written for the invalid call').toBe(0);
    expect(store.roundTrips, 'the three calls shared one round trip').toBe(1);
    await store.close();
  });
});
