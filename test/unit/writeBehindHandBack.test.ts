import { describe, expect, it } from 'vitest';
import { Limiter, MemoryStore } from '../../src/index.js';
import { storageKey } from '../../src/stores/keys.js';
import { tokenBucketAcquire } from '../../src/stores/tokenBucketOps.js';
import { FaultyStore } from '../support/faultyStore.js';
import { countFleet, settle } from '../support/virtualFleet.js';

describe('usage riding on a hand-back', () => {
  it('is reported later when the hand-back was never sent, not lost', async () => {
    let t = 1_000_000;
    const now = () => t;
    const shared = new MemoryStore({ now });
    const bucket = { algorithm: 'token-bucket' as const, rate: 1, period: '1d' as const, burst: 100 };
    const storeA = new FaultyStore(shared);
    // A decides under allowances; B only leases, so the bucket falls below half while A reports.
    const a = new Limiter({ store: storeA, policies: { p: bucket }, now, sweepIntervalMs: 0 });
    const b = new Limiter({
      store: new FaultyStore(shared),
      policies: { p: { ...bucket, lease: { writeBehind: false } } },
      now,
      sweepIntervalMs: 0,
    });
    await countFleet([a, b], (ms) => {
      t += ms;
    });
    /** The bucket's level, read without changing it (a refused probe writes nothing). */
    const level = async () => {
      const probe = { rate: 1, periodMs: 86_400_000, burst: 100, want: 1e9, min: 1e9, ahead: 0 };
      return (await shared.run(tokenBucketAcquire, storageKey('token-bucket', 'p', 'k'), probe)).levelBefore;
    };
    let admitted = 0;
    const count = (d: { allowed: boolean }) => {
      if (d.allowed) admitted++;
    };
    for (let i = 0; i < 35; i++) count(await b.consume('p', 'k'));
    // A's first sight, reported: the level (65) is below three quarters of the burst, so A is
    // granted an allowance of level / (2 · fleet).
    const allowance = Math.floor(((await level()) - 1) / 4);
    count(await a.consume('p', 'k'));
    await settle();
    // A spends it all at once: its report goes out when a quarter is left, and what A admits while
    // the report flies stays unreported. The answer, below half the burst, is a lease nobody uses.
    (await Promise.all(Array.from({ length: allowance }, () => a.consume('p', 'k')))).forEach(count);
    await settle();
    // The lease expires while the store is down: its hand-back, carrying that usage, is never sent.
    storeA.fault = 'down';
    t += 10_000;
    a.sweep();
    await settle();
    storeA.fault = 'none';
    t += 10_000;
    a.sweep();
    await settle();
    await a.close();
    await b.close();
    const levelBefore = await level();
    const stranded = a.stats().tokensStranded;
    expect(stranded, 'the hand-back failed: its leased tokens are stranded').toBeGreaterThan(0);
    // The refill over 20 s is a quarter of a token.
    expect(100 - levelBefore - stranded, 'every admission is counted once').toBeCloseTo(admitted, 0);
    const { tokensAllowed, tokensReported } = a.stats();
    expect(tokensReported, 'the stats count the usage reported once, not once per try').toBe(tokensAllowed);
  });
});
