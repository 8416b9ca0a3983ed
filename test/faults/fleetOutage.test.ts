/**
 * Issue 13 item 14: during an outage the fail policy of every instance admits a share of each
 * key's limit. With the default `expectedInstances: 1`, that share must come from the fleet the
 * store counted before the outage, so the cluster admits about the limit, not the limit once per
 * instance.
 */
import { describe, expect, it } from 'vitest';
import { closeFleet, outageFleet } from '../support/outageFleet.js';
import { privateRedis } from '../support/privateRedis.js';

const delay = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

const INSTANCES = 5;
const KEYS = ['a', 'b', 'c'];
const RATE = 100;
/** Requests per instance and key during the outage: twice the whole limit each. */
const ASKED = 2 * RATE;

// Killed by the test: a server of its own.
const redis = privateRedis();

describe('outage admissions with the default expectedInstances', () => {
  it('across 5 instances, about the limit per key, not 5 times it', async () => {
    // fail: 'local' (the default), expectedInstances left at its default of 1.
    const instances = await outageFleet(redis.client, INSTANCES, {
      policies: { p: { algorithm: 'token-bucket', rate: RATE, burst: RATE } },
    });

    // Traffic at about the limit, spread evenly, until every instance has counted the fleet.
    const demandEveryMs = (1000 * INSTANCES) / RATE;
    for (let round = 0; round < 200; round++) {
      await Promise.all(instances.flatMap(({ limiter }) => KEYS.map((k) => limiter.consume('p', k))));
      if (round >= 100 && instances.every(({ limiter }) => limiter.stats().fleet === INSTANCES)) break;
      await delay(demandEveryMs);
    }
    const fleets = instances.map(({ limiter }) => limiter.stats().fleet);
    expect(fleets, 'every instance counted the fleet before the outage').toEqual(fleets.map(() => INSTANCES));

    await redis.server().kill();
    const start = performance.now();
    const admitted = new Map(KEYS.map((k) => [k, { fallback: 0, lease: 0 }]));
    for (let i = 0; i < ASKED; i++) {
      const decisions = await Promise.all(
        instances.flatMap(({ limiter }) => KEYS.map((k) => limiter.consume('p', k))),
      );
      decisions.forEach((d, j) => {
        if (!d.allowed) return;
        const count = admitted.get(KEYS[j % KEYS.length]!)!;
        if (d.source === 'fallback') count.fallback++;
        else count.lease++;
      });
    }
    const seconds = (performance.now() - start) / 1000;
    // The cluster's budget: the whole burst plus the refill, shared by the fleet.
    const budget = RATE + RATE * seconds;
    const lines = [...admitted].map(
      ([k, c]) => `${k}: ${c.fallback} by the fail policy + ${c.lease} from leases held`,
    );
    console.log(
      `outage, ${INSTANCES} instances, limit ${RATE}/s, ${ASKED} asked per instance and key in ` +
        `${seconds.toFixed(2)} s (budget ${budget.toFixed(0)}): ${lines.join('; ')}`,
    );
    for (const [k, c] of admitted) {
      expect(c.fallback, `key ${k}: fail-policy admissions across instances`).toBeLessThanOrEqual(
        // Each share is at least one token, and a share from recent leases may exceed 1/fleet.
        1.25 * budget + INSTANCES,
      );
      expect(c.fallback, `key ${k}: the fail policy admitted something`).toBeGreaterThan(0);
    }
    await closeFleet(instances);
  });
});
