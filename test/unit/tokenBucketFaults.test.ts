import { describe, expect, it } from 'vitest';
import { reserve } from '../../src/algorithms/leakyBucket.js';
import { acquire, debit, type TokenBucketState } from '../../src/algorithms/tokenBucket.js';

const shape = { rate: 10, periodMs: 1000, burst: 10 };
const req = (want: number, min = want) => ({ ...shape, want, min, ahead: 0 });
const HOUR = 3_600_000;

describe('token bucket under store clock jumps', () => {
  it('a backward jump on an empty bucket refills from the new time, not after the jump is made up', () => {
    let state: TokenBucketState | undefined = { level: 0, ts: 10 * HOUR };
    // The store clock steps back an hour.
    let now = 9 * HOUR;
    const refused = acquire(state, now, req(1));
    expect(refused.result.granted).toBe(0);
    expect(refused.state, 'the refusal rebases ts so refill can resume').toEqual({ level: 0, ts: now });
    state = refused.state;
    now += 100; // one token's refill time at 10/s
    const t = acquire(state, now, req(1));
    expect(t.result.granted, 'granted after 100 ms, not after an hour').toBe(1);
  });

  it('a backward jump grants nothing extra', () => {
    const t = acquire({ level: 3, ts: 10 * HOUR }, 9 * HOUR, req(10, 1));
    expect(t.result).toMatchObject({ granted: 3, levelBefore: 3 });
  });

  it('a forward jump refills at most one burst', () => {
    const t = acquire({ level: -5, ts: 0 }, 1_000 * HOUR, req(1_000, 1));
    expect(t.result.levelBefore).toBe(shape.burst);
    expect(t.result.granted, 'never more than the burst, however far the clock jumped').toBe(shape.burst);
  });
});

describe('token bucket write-back debit', () => {
  it('takes the tokens from a full or absent bucket', () => {
    const t = debit(undefined, 0, { ...shape, tokens: 4 });
    expect(t.result).toBe(4);
    expect(t.state).toEqual({ level: 6, ts: 0 });
    expect(t.ttlMs, 'expires when full again, like any bucket').toBe(401);
  });

  it('takes the bucket down to empty and no further', () => {
    const t = debit({ level: 3, ts: 0 }, 0, { ...shape, tokens: 50 });
    expect(t.result).toBe(3);
    expect(t.state?.level).toBe(0);
  });

  it('leaves a level below zero (leases reaching ahead) alone', () => {
    const state = { level: -2, ts: 0 };
    const t = debit(state, 0, { ...shape, tokens: 5 });
    expect(t.result).toBe(0);
    expect(t.state, 'nothing written').toBe(state);
  });

  it('counts refill up to now before debiting', () => {
    const t = debit({ level: 0, ts: 0 }, 500, { ...shape, tokens: 2 });
    expect(t.result).toBe(2);
    expect(t.state).toEqual({ level: 3, ts: 500 });
  });
});

describe('leaky bucket with a large clock', () => {
  it('a fresh bucket admits exactly `burst` at once (no rounding from subtracting large times)', () => {
    // Found by the fuzz test: 29 per 250 ms, burst 1, at a Unix-epoch clock.
    const t = reserve(undefined, 1_700_000_000_000, {
      rate: 29,
      periodMs: 250,
      burst: 1,
      cost: 1,
      maxWaitMs: 0,
    });
    expect(t.result).toMatchObject({ allowed: true, delayMs: 0 });
  });
});
