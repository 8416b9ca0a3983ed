import { describe, expect, it } from 'vitest';
import { acquire, msUntilFull, msUntilRoom, release, sync } from '../../src/algorithms/tokenBucket.js';

const shape = { rate: 10, periodMs: 1000, burst: 10 };
const req = (want: number, min = want, ahead = 0) => ({ ...shape, want, min, ahead });

describe('token bucket allocator', () => {
  it('treats an absent bucket as full and debits the grant', () => {
    const t = acquire(undefined, 0, req(4));
    expect(t.result).toEqual({ granted: 4, levelBefore: 10, now: 0, lent: 0, lentMs: 0 });
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

  it('with tokens out in leases, says no later than they come back, or the refill of what they do not cover', () => {
    expect(msUntilRoom(-3, shape, 2, 0, { lent: 6, lentMs: 200 }), 'they cover the 5 missing').toBe(200);
    expect(msUntilRoom(-3, shape, 2, 0, { lent: 2, lentMs: 200 }), '3 still to refill').toBe(300);
    expect(msUntilRoom(-3, shape, 2, 0, { lent: 6, lentMs: 900 }), 'the refill is sooner').toBe(500);
  });
});

describe('token bucket sync: tokens out in leases', () => {
  const ask = (want: number, returned = 0) => ({
    ...shape,
    used: 0,
    returned,
    want,
    min: 1,
    ahead: 10,
    allowance: 0,
    fleet: 0,
    holdMs: 2000,
    spent: 0,
  });

  it('counts what a lease takes of existing tokens until a lease time after the last of them exists', () => {
    const t = sync({ level: 3, ts: 0 }, 0, ask(5));
    // 3 exist now; the other 2 exist 200 ms later (10/s), then the lease is held 2 s at most.
    expect(t.state).toEqual({ level: -2, ts: 0, lent: 3, lentUntil: 2200 });
    const refused = sync(t.state, 100, { ...ask(1), ahead: 0 });
    expect(refused.result.granted, 'nothing fits').toBe(0);
    expect(refused.result, 'the reply says what may come back, and by when').toMatchObject({
      lent: 3,
      lentMs: 2100,
    });
  });

  it('forgets them once handed back or past their time', () => {
    const t = sync({ level: 5, ts: 0 }, 0, ask(4));
    expect(t.state).toEqual({ level: 1, ts: 0, lent: 4, lentUntil: 2000 });
    expect(sync(t.state, 10, ask(0, 4)).state, 'handed back').toEqual({ level: 5.1, ts: 10 });
    expect(sync(t.state, 2000, ask(0)).result, 'past their time').toMatchObject({ lent: 0, lentMs: 0 });
  });
});
