import { Redis } from 'ioredis';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { Limiter, type PolicyConfig, RedisStore } from '../../src/index.js';
import { storageKey } from '../../src/stores/keys.js';
import { storedLevel } from '../support/bucketState.js';
import { closeAllClients, trackClient, uniquePrefix } from '../support/clients.js';

afterAll(closeAllClients);

const BURST = 200;
// No refill worth counting while a test runs: one token a day.
const bucket = (writeBehind: boolean): Record<string, PolicyConfig> => ({
  p: { algorithm: 'token-bucket', rate: 1, period: '1d', burst: BURST, lease: { writeBehind } },
});
// A window that does not end while a test runs.
const window = (writeBehind: boolean): Record<string, PolicyConfig> => ({
  p: { algorithm: 'fixed-window', limit: BURST, window: '1d', lease: { writeBehind } },
});

/** Limiters with their own connections, on a virtual limiter clock so the fleet is counted on demand. */
async function fleet(n: number, prefix: string, policies: Record<string, PolicyConfig>) {
  let t = 1_000_000;
  const now = () => t;
  const members = await Promise.all(
    Array.from({ length: n }, async () => {
      const client = trackClient(
        new Redis(inject('redisUrl'), { enableOfflineQueue: false, autoResendUnfulfilledCommands: false }),
      );
      const store = new RedisStore({ client, prefix, timeoutMs: 2000 });
      await store.ready();
      return {
        store,
        limiter: new Limiter({ store, policies, now, sweepIntervalMs: 0 }),
      };
    }),
  );
  // Heartbeats until every instance has counted the whole fleet (from its second beat on; a
  // loaded machine may take a while to answer them).
  for (let i = 0; i < 200 && members.some((m) => m.limiter.stats().fleet !== n); i++) {
    for (const m of members) m.limiter.sweep();
    await new Promise((resolve) => setTimeout(resolve, 25));
    t += 500;
  }
  expect(
    members.map((m) => m.limiter.stats().fleet),
    'every instance counted the whole fleet',
  ).toEqual(members.map(() => n));
  return members;
}

async function burstOf(members: Awaited<ReturnType<typeof fleet>>, key: string, requests: number) {
  const decisions = await Promise.all(
    Array.from({ length: requests }, (_, i) => members[i % members.length]!.limiter.consume('p', key)),
  );
  return decisions.filter((d) => d.allowed).length;
}

describe('write-behind allowances on real Redis', () => {
  it('20 instances admit at most half the burst, plus one first sight each, beyond the bucket; close() reports all', async () => {
    const prefix = uniquePrefix('wb');
    const members = await fleet(20, prefix, bucket(true));
    // A quiet period first: every instance sees the key once, learns it is far from its limit.
    expect(await burstOf(members, 'k', 20), 'far from the limit nothing is refused').toBe(20);
    const admitted = 20 + (await burstOf(members, 'k', 1000));
    expect(admitted, 'the exact bucket admits the burst').toBeGreaterThanOrEqual(BURST);
    expect(admitted, 'the stated bound').toBeLessThanOrEqual(BURST + BURST / 2 + 20);
    await Promise.all(members.map((m) => m.limiter.close()));
    const allowed = members.reduce((sum, m) => sum + m.limiter.stats().tokensAllowed, 0);
    expect(allowed, 'admitted under allowances').toBeGreaterThan(0);
    for (const m of members) {
      expect(m.limiter.stats().tokensReported, 'close() reported everything').toBe(
        m.limiter.stats().tokensAllowed,
      );
    }
    const admin = trackClient(new Redis(inject('redisUrl')));
    const level = await storedLevel(
      admin,
      members[0]!.store.redisKey(storageKey('token-bucket', 'p', 'k')),
      BURST,
    );
    // Every admission reported, every unused leased token handed back.
    expect(level, 'the store knows what the fleet admitted').toBeCloseTo(BURST - admitted, 0);
    await Promise.all(members.map((m) => m.store.close()));
  });

  it('with writeBehind false, 20 instances never admit more than the burst', async () => {
    const members = await fleet(20, uniquePrefix('nowb'), bucket(false));
    expect(await burstOf(members, 'k', 1000)).toBeLessThanOrEqual(BURST);
    await Promise.all(members.map((m) => m.limiter.close()));
    await Promise.all(members.map((m) => m.store.close()));
  });

  it('a tail of keys far from their limit is decided locally: one sync per key, batched into few round trips', async () => {
    const [member] = await fleet(1, uniquePrefix('tail'), bucket(true));
    const { limiter, store } = member!;
    const before = store.roundTrips;
    let allowed = 0;
    for (let round = 0; round < 20; round++) {
      const decisions = await Promise.all(
        Array.from({ length: 500 }, (_, i) => limiter.consume('p', `key-${i}`)),
      );
      allowed += decisions.filter((d) => d.allowed).length;
    }
    expect(allowed, 'nothing refused far from the limit').toBe(10_000);
    expect(limiter.stats().storeCalls, 'one sync per key: its first sight').toBeLessThanOrEqual(500);
    expect(store.roundTrips - before, 'the first sights of 500 keys share round trips').toBeLessThanOrEqual(
      20,
    );
    await limiter.close();
    await store.close();
  });

  it('fixed window: 20 instances admit at most limit + 19 × floor(limit / 80) per window; close() reports all', async () => {
    const prefix = uniquePrefix('wbw');
    const members = await fleet(20, prefix, window(true));
    // A window's first sight waits for the store (its usage names the window): then allowances.
    expect(await burstOf(members, 'k', 20), 'far from the limit nothing is refused').toBe(20);
    const local = () => members.reduce((sum, m) => sum + m.limiter.stats().localDecisions, 0);
    const before = local();
    expect(await burstOf(members, 'k', 20), 'a second request each').toBe(20);
    expect(local() - before, 'decided under the allowances, waiting for no store call').toBe(20);
    const admitted = 40 + (await burstOf(members, 'k', 1000));
    expect(admitted, 'the exact window admits the limit').toBeGreaterThanOrEqual(BURST);
    expect(admitted, 'the stated bound').toBeLessThanOrEqual(BURST + 19 * Math.floor(BURST / 80));
    await Promise.all(members.map((m) => m.limiter.close()));
    const admin = trackClient(new Redis(inject('redisUrl')));
    const count = Number(
      await admin.hget(members[0]!.store.redisKey(storageKey('fixed-window', 'p', 'k')), 'n'),
    );
    expect(count, 'every admission reported, every unused slice handed back').toBe(admitted);
    expect(
      await admin.pttl(members[0]!.store.redisKey(storageKey('fixed-window', 'p', 'k'))),
    ).toBeGreaterThan(0);
    await Promise.all(members.map((m) => m.store.close()));
  });

  it('fixed window with writeBehind false: 20 instances never admit more than the limit', async () => {
    const members = await fleet(20, uniquePrefix('nowbw'), window(false));
    expect(await burstOf(members, 'k', 1000)).toBeLessThanOrEqual(BURST);
    await Promise.all(members.map((m) => m.limiter.close()));
    await Promise.all(members.map((m) => m.store.close()));
  });
});
