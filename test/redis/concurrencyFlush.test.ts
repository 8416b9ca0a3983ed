/**
 * Redis losing a concurrency policy's slots while requests hold them (`FLUSHALL` here; a restart
 * without persistence or a failover losing recent writes look the same to the holders): the
 * holders' next renewal puts their slots back while they fit under the limit, so new acquires
 * are refused again instead of being admitted as if nothing were held. On a redis-server of this
 * file's own (FLUSHALL would empty the shared one under other files' feet).
 */
import { afterAll, describe, expect, it } from 'vitest';
import { Limiter, RedisStore } from '../../src/index.js';
import { privateRedis } from '../support/privateRedis.js';

const { client } = privateRedis();
const delay = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

const limiters: Limiter[] = [];
afterAll(async () => {
  await Promise.all(limiters.map((l) => l.close()));
});

function instance(): Limiter {
  const l = new Limiter({
    store: new RedisStore({ client: client(), prefix: 'flush:', timeoutMs: 2000 }),
    // Exact: every slot is held in Redis, none pooled locally, so what Redis holds is what is in use.
    policies: { exports: { algorithm: 'concurrency', limit: 2, slotTtl: '600ms', lease: 'exact' } },
    sweepIntervalMs: 50,
  });
  limiters.push(l);
  return l;
}

/** Slots Redis holds for the key, once it holds `expected` (the holders renew every ~300 ms). */
async function heldInRedis(expected: number): Promise<number> {
  const admin = client();
  let held = 0;
  for (let i = 0; i < 60 && held !== expected; i++) {
    const [key] = await admin.keys('flush:*exports*');
    held = key === undefined ? 0 : await admin.zcard(key);
    if (held !== expected) await delay(50);
  }
  return held;
}

describe('concurrency slots after Redis lost them', () => {
  it('FLUSHALL while both slots are held: the holder renews them back, and a newcomer is refused', async () => {
    const holder = instance();
    const newcomer = instance();
    const slots = [await holder.acquire('exports', 'tenant-7'), await holder.acquire('exports', 'tenant-7')];
    expect(slots.map((s) => s.allowed)).toEqual([true, true]);
    expect((await newcomer.acquire('exports', 'tenant-7')).allowed, 'full before the flush').toBe(false);

    await client().flushall();
    expect(await heldInRedis(2), "the holder's renewal recreated both slots").toBe(2);
    const refused = await newcomer.acquire('exports', 'tenant-7');
    expect(refused.allowed, 'the limit still holds after the flush').toBe(false);

    await Promise.all(slots.map((s) => s.release()));
    const admitted = await newcomer.acquire('exports', 'tenant-7');
    expect(admitted.allowed, 'released slots are free again').toBe(true);
    await admitted.release();

    const admin = client();
    for (const key of await admin.keys('flush:*')) expect(await admin.pttl(key), key).toBeGreaterThan(0);
  });

  it('renewal puts back only what fits: slots someone else took in the meantime stay lost', async () => {
    const holder = instance();
    const newcomer = instance();
    const slots = [await holder.acquire('exports', 'tenant-8'), await holder.acquire('exports', 'tenant-8')];
    expect(slots.map((s) => s.allowed)).toEqual([true, true]);
    await client().flushall();
    // Before the holder's next renewal (every ~300 ms), a newcomer takes one of the places.
    const taken = await newcomer.acquire('exports', 'tenant-8');
    expect(taken.allowed).toBe(true);
    await delay(700);
    const admin = client();
    const [key] = await admin.keys('flush:*tenant-8*');
    expect(await admin.zcard(key!), "one of the holder's two put back: the limit, no more").toBe(2);
    expect((await newcomer.acquire('exports', 'tenant-8')).allowed).toBe(false);
    await taken.release();
    await Promise.all(slots.map((s) => s.release()));
  });
});
