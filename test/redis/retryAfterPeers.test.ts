import { afterAll, describe, expect, it } from 'vitest';
import { type Decision, Limiter, type PolicyConfig, RedisStore } from '../../src/index.js';
import { storageKey } from '../../src/stores/keys.js';
import { storedLevel } from '../support/bucketState.js';
import { closeAllClients, redisClient, uniquePrefix } from '../support/clients.js';

afterAll(closeAllClients);

/**
 * Found in an operator trial: three instances round-robin on one key at 100/h, burst 100. When the
 * bucket ran out, one instance refused with a Retry-After of about 180 s while about 14 tokens sat
 * in its peers' leases, which come back within the lease ttl (2 s). A client that honours the
 * Retry-After then under-uses the limit. The refused client must be told a wait that is true: no
 * later than when the peers' leases come back, and coming back then, it passes.
 */
const POLICIES: Record<string, PolicyConfig> = {
  p: { algorithm: 'token-bucket', rate: 100, period: '1h', burst: 100 },
};
const TTL_MS = 2000;

describe('Retry-After while peers hold leased tokens (real Redis)', () => {
  it('is no later than when the peers hand their leases back, and a client coming back then passes', async () => {
    // One virtual clock for the store and the limiters: the test decides when leases expire.
    let t = 1_700_000_000_000;
    const now = () => t;
    const prefix = uniquePrefix('retry-peers');
    const stores = [0, 1, 2].map(
      () => new RedisStore({ client: redisClient(), prefix, now, timeoutMs: 2000 }),
    );
    await Promise.all(stores.map((s) => s.ready()));
    const limiters = stores.map(
      (store) => new Limiter({ store, policies: POLICIES, now, sweepIntervalMs: 0 }),
    );

    // One request a millisecond, round-robin, until one is refused.
    let admitted = 0;
    let refused: { decision: Decision; instance: number } | undefined;
    for (let i = 0; i < 300 && refused === undefined; i++) {
      const decision = await limiters[i % 3]!.consume('p', 'k');
      if (decision.allowed) admitted++;
      else refused = { decision, instance: i % 3 };
      t += 1;
    }
    expect(refused, 'the burst ran out').toBeDefined();
    const { decision, instance } = refused!;
    // 0.3 s at 100/h refills 0.008 tokens: what the burst has left is held in leases (a few: below
    // half the burst each instance holds one lease at a time; fourteen before that).
    expect(100 - admitted, 'tokens sit in leases when the refusal comes').toBeGreaterThanOrEqual(1);
    // A lease goes back a lease ttl after the last of its tokens exists, and by default leases reach
    // at most a ttl ahead: the peers' leases are back within two ttls, not minutes.
    expect(decision.retryAfterMs, 'no later than the peers hand their leases back').toBeLessThanOrEqual(
      2 * TTL_MS,
    );
    expect(decision.retryAfterMs, 'and not now: nothing is free yet').toBeGreaterThan(0);

    // The client comes back when told; by then the peers have handed back what they did not use.
    t += decision.retryAfterMs;
    const bucket = stores[0]!.redisKey(storageKey('token-bucket', 'p', 'k'));
    const admin = redisClient();
    const before = await storedLevel(admin, bucket, 100);
    for (const l of limiters) l.sweep();
    // The hand-backs are background calls: wait until the store has them.
    for (let i = 0; i < 100 && (await storedLevel(admin, bucket, 100)) <= before; i++) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const again = await limiters[instance]!.consume('p', 'k');
    expect(again.allowed, 'the client that honoured Retry-After passes').toBe(true);

    // Nothing beyond the exact bucket: the burst plus what refilled.
    let more = 0;
    for (let i = 0; i < 300; i++) {
      if ((await limiters[i % 3]!.consume('p', 'k')).allowed) more++;
      t += 1;
    }
    const refilled = ((t - 1_700_000_000_000) * 100) / 3_600_000;
    expect(admitted + 1 + more, 'never more than the exact bucket').toBeLessThanOrEqual(100 + refilled);
    await Promise.all(limiters.map((l) => l.close()));
    await Promise.all(stores.map((s) => s.close()));
  });
});
