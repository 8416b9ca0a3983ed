import { describe, expect, it } from 'vitest';
import { acquire, msUntilFull, msUntilRoom, release } from '../../src/algorithms/tokenBucket.js';

const shape = { rate: 10, periodMs: 1000, burst: 10 };
const req = (want: number, min = want, ahead = 0) => ({ ...shape, want, min, ahead });

describe('token bucket allocator', () => {
  it('treats an absent bucket as full and debits the grant', () => {
    const t = acquire(undefined, 0, req(4));
    expect(t.result).toEqual({ granted: 4, levelBefore: 10, now: 0 });
    expect(t.state).toEqual({ level: 6, ts: 0 });
  });

  it('grants what is left when at least `min` fits, and nothing below it', () => {
    const partial = acquire({ level: 3, ts: 0 }, 0, req(5, 2));
    expect(partial.result.granted).toBe(3);
    const none = acquire({ level: 1, ts: 0 }, 0, req(5, 2));
    expect(none.result.granted, 'a refusal').toBe(0);
    expect(none.state, 'a refusal writes nothing').toEqual({ level: 1, ts: 0 });
  });

  it('refills by elapsed time and never above the burst', () => {
    expect(acquire({ level: 0, ts: 0 }, 500, req(1)).result.levelBefore).toBe(5);
    expect(acquire({ level: 0, ts: 0 }, 60_000, req(1)).result.levelBefore).toBe(10);
  });

  it('lets leases reach `ahead` tokens into the future, no further', () => {
    const t = acquire({ level: 0, ts: 0 }, 0, req(4, 1, 5));
    expect(t.result.granted).toBe(4);
    expect(t.state?.level).toBe(-4);
    expect(acquire({ level: -4, ts: 0 }, 0, req(4, 1, 5)).result.granted, 'only 1 fits').toBe(1);
    expect(acquire({ level: -5, ts: 0 }, 0, req(4, 1, 5)).result.granted).toBe(0);
  });

  it('ignores a clock that went backwards instead of blocking', () => {
    const t = acquire({ level: 2, ts: 10_000 }, 5_000, req(1));
    expect(t.result.levelBefore).toBe(2);
    expect(t.state?.ts).toBe(5_000);
  });

  it('caps returned tokens at the burst and does not recreate an expired bucket', () => {
    expect(release({ level: 8, ts: 0 }, 0, { ...shape, tokens: 5 }).state?.level).toBe(10);
    expect(release(undefined, 0, { ...shape, tokens: 5 }).state).toBeUndefined();
  });

  it('expires a key exactly when the bucket would be full', () => {
    const ttl = msUntilFull(4, shape);
    expect(ttl).toBe(601);
    expect(acquire({ level: 4, ts: 0 }, ttl, req(1)).result.levelBefore).toBe(10);
  });

  it('says when `min` tokens fit again', () => {
    expect(msUntilRoom(-3, shape, 2, 0)).toBe(500);
    expect(msUntilRoom(5, shape, 2, 0)).toBe(0);
  });
});
