/**
 * During an outage, `fail: 'local'` admits this instance's share of a quota-like rule (an hourly
 * window, a daily bucket), not the whole rule on every instance. Found in the fourth operator
 * trial: 6 limiters with `expectedInstances: 6` on a 600/h window, Redis stopped, admitted 600 each
 * (3600 in all). The share from recent leases compared this instance's lease rate with the rule's
 * refill rate, which for an hourly quota any instance in use outruns: its share came out as 1.
 */
import { describe, expect, it } from 'vitest';
import type { PolicyConfig } from '../../src/index.js';
import { closeFleet, outageFleet } from '../support/outageFleet.js';
import { privateRedis } from '../support/privateRedis.js';

const INSTANCES = 6;
const LIMIT = 600;

// Killed by the test: a server of its own.
const redis = privateRedis();

const QUOTAS: [string, PolicyConfig][] = [
  ['fixed window 600/h', { algorithm: 'fixed-window', limit: LIMIT, window: '1h' }],
  ['token bucket 600/h', { algorithm: 'token-bucket', rate: LIMIT, period: '1h', burst: LIMIT }],
];

describe('fail: local on a quota-like rule', () => {
  it('admits about one share per instance, not the whole rule on each', async () => {
    const instances = await outageFleet(redis.client, INSTANCES, {
      expectedInstances: INSTANCES,
      policies: Object.fromEntries(QUOTAS),
    });
    // Half of each quota spent before the outage, evenly: 50 per instance.
    for (let i = 0; i < LIMIT / 2 / INSTANCES; i++) {
      for (const { limiter } of instances) {
        for (const [policy] of QUOTAS) expect((await limiter.consume(policy, 'client')).allowed).toBe(true);
      }
    }
    await redis.server().kill();
    const fallback = new Map(QUOTAS.map(([policy]) => [policy, 0]));
    for (const { limiter } of instances) {
      for (const [policy] of QUOTAS) {
        for (let i = 0; i < LIMIT; i++) {
          const d = await limiter.consume(policy, 'client');
          if (d.allowed && d.source === 'fallback') fallback.set(policy, fallback.get(policy)! + 1);
        }
      }
    }
    console.log(`outage, ${INSTANCES} instances, 600/h quotas: fail-policy admissions`, fallback);
    for (const [policy, n] of fallback) {
      // Budget (docs/operations.md): s·burst + s·rate·t per instance, s = 1/6, an outage of seconds.
      expect(n, `${policy}: fail-policy admissions across instances`).toBeLessThanOrEqual(LIMIT + INSTANCES);
      expect(n, `${policy}: the fail policy admitted something`).toBeGreaterThan(0);
    }
    await closeFleet(instances);
  });
});
