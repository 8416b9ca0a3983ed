/**
 * Issue 11, abuse: a flood of keys new to the instance, all in one event-loop turn, against a
 * healthy Redis. Before the fix, the calls that waited behind earlier batches counted as timed out
 * (the clock ran while Redis worked through the batches ahead of them), three of them opened the
 * breaker, and what the fail policy admitted was not all written back: the store was charged for
 * fewer requests than were admitted.
 */
import type { Cluster, Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { type BreakerEvent, Limiter, RedisStore, type StoreCallEvent } from '../../src/index.js';
import { storageKey } from '../../src/stores/keys.js';
import { storedLevel } from '../support/bucketState.js';
import { clusterClient } from '../support/clients.js';
import { eventually } from '../support/eventually.js';
import { privateRedis } from '../support/privateRedis.js';

const KEYS = 10_000;
/** A refill negligible over the test: what a bucket lost is what was charged to it. */
const BURST = 100;
const POLICY = { algorithm: 'token-bucket', rate: BURST, period: '30d', burst: BURST } as const;

// A server of its own: the flood would slow every other test file on a shared one.
const { client } = privateRedis();

type Connect = () => Redis | Cluster;

async function flood(fleetKnown: boolean, connect: Connect = client) {
  const prefix = `kf:${Math.random().toString(36).slice(2, 8)}:`;
  const store = new RedisStore({ client: connect(), prefix });
  await store.ready();
  const breakerStates: string[] = [];
  const timeouts: StoreCallEvent[] = [];
  const limiter = new Limiter({
    store,
    policies: { p: POLICY },
    observers: [
      {
        breaker: (e: BreakerEvent) => breakerStates.push(e.state),
        storeCall: (e: StoreCallEvent) => {
          if (e.errorCode === 'ERR_TOKENLEASE_STORE_TIMEOUT') timeouts.push(e);
        },
      },
    ],
  });
  if (fleetKnown) await eventually(async () => expect(limiter.stats().fleet).toBeGreaterThan(0));
  const keys = Array.from({ length: KEYS }, (_, i) => `new-${i}`);
  const decisions = await Promise.all(keys.map((k) => limiter.consume('p', k)));
  await limiter.close();
  const stats = limiter.stats();
  const admin = connect();
  let charged = 0;
  for (const k of keys) {
    const level = await storedLevel(admin, store.redisKey(storageKey('token-bucket', 'p', k)), BURST);
    charged += Math.ceil(BURST - level);
  }
  const roundTrips = store.roundTrips;
  await store.close();
  return { decisions, breakerStates, timeouts, stats, charged, roundTrips };
}

function expectChargedOnce(run: Awaited<ReturnType<typeof flood>>): void {
  expect(run.decisions.filter((d) => !d.allowed)).toEqual([]);
  expect(run.breakerStates).toEqual([]);
  expect(run.timeouts).toEqual([]);
  expect(run.stats.tokensNotWrittenBack).toBe(0);
  expect(run.charged).toBe(KEYS);
}

describe('10 000 keys new to an instance in one turn, healthy Redis', () => {
  for (const fleetKnown of [false, true]) {
    it(`admits them all, opens no breaker and charges each once (fleet ${fleetKnown ? 'known' : 'unknown'})`, async () => {
      const run = await flood(fleetKnown);
      const { fallbackDecisions, tokensWrittenBack } = run.stats;
      console.log(
        `fleet ${fleetKnown ? 'known' : 'unknown'}: ${fallbackDecisions} decisions by the fail policy (store calls queued past timeoutMs), ${tokensWrittenBack} tokens written back, ${run.roundTrips} round trips`,
      );
      expectChargedOnce(run);
      // Batched: a few dozen round trips, not one per key (nor one per debt written back).
      expect(run.roundTrips).toBeLessThan(KEYS / 50);
    }, 60_000);
  }

  it('on a 3-master Cluster too: each node answers its own batches in order', async () => {
    const run = await flood(false, clusterClient);
    console.log(
      `cluster: ${run.stats.fallbackDecisions} decisions by the fail policy, ${run.roundTrips} round trips`,
    );
    // Batches are cut per slot group, so there are more of them than on one node: no bound on them here.
    expectChargedOnce(run);
  }, 60_000);
});
