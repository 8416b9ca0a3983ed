import { afterAll, describe, expect, it } from 'vitest';
import { Limiter, MemoryStore, RedisStore } from '../../src/index.js';
import { storageKey } from '../../src/stores/keys.js';
import { tokenBucketAcquire, tokenBucketRelease } from '../../src/stores/tokenBucketOps.js';
import { closeAllClients, redisClient, uniquePrefix } from '../support/clients.js';
import { FaultyStore } from '../support/faultyStore.js';

afterAll(closeAllClients);

const delay = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const bucket = (rate: number, burst = rate) => ({ algorithm: 'token-bucket' as const, rate, burst });

describe('bounded memory', () => {
  it('the local table never exceeds maxKeys, with the store up or down', async () => {
    let t = 0;
    const store = new FaultyStore(new MemoryStore({ now: () => t }));
    const limiter = new Limiter({
      store,
      policies: { p: bucket(100) },
      now: () => t,
      maxKeys: 50,
      sweepIntervalMs: 0,
    });
    for (let batch = 0; batch < 40; batch++) {
      store.fault = batch % 2 === 0 ? 'none' : 'down'; // fallback state lives in the same bounded entries
      await Promise.all(
        Array.from({ length: 100 }, (_, i) => limiter.consume('p', `attacker-${batch}-${i}`)),
      );
      expect(limiter.stats().keys).toBeLessThanOrEqual(50);
      t += 10;
    }
    await limiter.close();
  });

  it('MemoryStore forgets a flood of unique keys once their buckets are full again', async () => {
    let t = 0;
    const store = new MemoryStore({ now: () => t });
    const limiter = new Limiter({
      store,
      policies: { p: bucket(100) },
      now: () => t,
      maxKeys: 100,
      sweepIntervalMs: 0,
    });
    let peak = 0;
    for (let i = 0; i < 20_000; i++) {
      await limiter.consume('p', `attacker-${i}`);
      t += 1; // 1000 unique keys a second, each bucket full again 10 ms after its one request
      peak = Math.max(peak, store.size);
    }
    // Expired entries are swept every 4096 operations: never more than that plus the live ones.
    expect(peak).toBeLessThanOrEqual(4096 + 100);
    await limiter.close();
  });

  it('Redis memory per key stays constant however long the key is used', async () => {
    const client = redisClient();
    const prefix = uniquePrefix('mem');
    const store = new RedisStore({ client, prefix, timeoutMs: 1000 });
    const shape = { rate: 1000, periodMs: 1000, burst: 1_000_000 };
    const usage = async (key: string) => Number(await client.memory('USAGE', prefix + key));
    await store.ready();

    await store.run(tokenBucketAcquire, 'short', { ...shape, want: 1, min: 1, ahead: 0 });
    const first = await usage('short');
    let most = first;
    for (let i = 0; i < 500; i++) {
      const want = 1 + (i % 7) / 3; // fractional levels: the longest decimal strings
      await store.run(tokenBucketAcquire, 'short', { ...shape, want, min: want, ahead: 1000 });
      if (i % 3 === 0) await store.run(tokenBucketRelease, 'short', { ...shape, tokens: want / 2 });
      if (i % 50 === 0) most = Math.max(most, await usage('short'));
    }
    // Two fields of at most 24 characters each: the size can move by a few bytes, never grow.
    expect(most - first).toBeLessThanOrEqual(48);
    // A 10 KB client key is hashed into a fixed-size storage key.
    const long = storageKey('token-bucket', 'p', 'x'.repeat(10_240));
    await store.run(tokenBucketAcquire, long, { ...shape, want: 1, min: 1, ahead: 0 });
    expect(await usage(long)).toBeLessThanOrEqual(first + 64);
    console.log(`Redis MEMORY USAGE per bucket key: ${first}..${most} bytes (prefix ${prefix.length} chars)`);
    await store.close();
  });

  it('a bucket too slow to refill within what PEXPIRE accepts still gets a TTL', async () => {
    const client = redisClient();
    const prefix = uniquePrefix('ttl');
    const store = new RedisStore({ client, prefix, timeoutMs: 1000 });
    await store.ready();
    // Policies cannot be configured like this; the script must still never leave a key behind.
    await store.run(tokenBucketAcquire, 'k', {
      rate: 1e-300,
      periodMs: 1,
      burst: 10,
      want: 1,
      min: 1,
      ahead: 0,
    });
    const ttl = await client.pttl(`${prefix}k`);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(1e13);
    await store.close();
  });

  it('a flood of unique keys leaves nothing in Redis once the buckets have refilled', async () => {
    const client = redisClient();
    const prefix = uniquePrefix('flood');
    const store = new RedisStore({ client, prefix, timeoutMs: 1000 });
    await store.ready();
    // 1/s: each key lives the 1 s its bucket takes to refill, long enough to be seen alive after the
    // flood on a loaded machine (at 10/s, 100 ms, the flood alone outlasted it there).
    const limiter = new Limiter({ store, policies: { p: bucket(1) }, maxKeys: 500 });
    const keys = Array.from({ length: 2000 }, (_, i) => `attacker-${i}`);
    for (let i = 0; i < keys.length; i += 100) {
      await Promise.all(keys.slice(i, i + 100).map((k) => limiter.consume('p', k)));
    }
    const stored = keys.map((k) => prefix + storageKey('token-bucket', 'p', k));
    const live = async () => {
      let n = 0;
      for (let i = 0; i < stored.length; i += 500) n += await client.exists(...stored.slice(i, i + 500));
      return n;
    };
    const right = await live();
    expect(right, 'each key exists while its bucket is below full').toBeGreaterThan(0);
    // Only until then: each lives at most the 1 s its bucket takes to refill (a wall-clock check
    // that some had gone already failed on loaded machines, and could on fast ones).
    const ttls = await Promise.all(stored.slice(0, 100).map((k) => client.pttl(k)));
    expect(Math.max(...ttls), 'no key lives longer than its refill').toBeLessThanOrEqual(1000);
    expect(
      ttls.filter((t) => t === -1),
      'every key has a TTL',
    ).toEqual([]);
    await limiter.close();
    // A bucket's key expires when it would be full again: here 1 token at 1/s, 1 s.
    await delay(1100);
    expect(await live(), 'nothing outlives its usefulness').toBe(0);
    await store.close();
  });
});
