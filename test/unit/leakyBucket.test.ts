import { describe, expect, it } from 'vitest';
import { cancel, type LeakyBucketState, reserve } from '../../src/algorithms/leakyBucket.js';

// 10 per second: one unit drains in 100 ms.
const shape = { rate: 10, periodMs: 1000 };
const req = (cost = 1, maxWaitMs = 0, burst = 1) => ({ ...shape, burst, cost, maxWaitMs });

describe('leaky bucket (shaping)', () => {
  it('spaces requests exactly one drain interval apart', () => {
    let state: LeakyBucketState | undefined;
    const delays: number[] = [];
    for (let i = 0; i < 5; i++) {
      const t = reserve(state, 0, req(1, 10_000));
      state = t.state;
      delays.push(t.result.delayMs);
    }
    expect(delays).toEqual([0, 100, 200, 300, 400]);
  });

  it('lets `burst` units through at once, then makes the rest wait', () => {
    let state: LeakyBucketState | undefined;
    const delays: number[] = [];
    for (let i = 0; i < 5; i++) {
      const t = reserve(state, 0, req(1, 10_000, 3));
      state = t.state;
      delays.push(t.result.delayMs);
    }
    expect(delays).toEqual([0, 0, 0, 100, 200]);
  });

  it('refuses, recording nothing, only when the wait would exceed the bound', () => {
    const state = { tat: 500 };
    const refused = reserve(state, 0, req(1, 400));
    expect(refused.result).toEqual({ allowed: false, delayMs: 500, backlogMs: 500 });
    expect(refused.state).toBe(state);
    expect(reserve(state, 0, req(1, 500)).result).toEqual({ allowed: true, delayMs: 500, backlogMs: 600 });
  });

  it('makes a request above the burst wait for the excess even in an empty bucket', () => {
    expect(reserve(undefined, 0, req(4, 1000)).result.delayMs).toBe(300);
  });

  it('drains while idle and forgets the key once empty', () => {
    const t = reserve(undefined, 0, req(3, 1000));
    expect(t.ttlMs).toBe(301);
    expect(reserve(t.state, 300, req(1)).result).toMatchObject({ allowed: true, delayMs: 0 });
  });

  it('gives a cancelled reservation back: the next request takes the freed turn', () => {
    let state = reserve(undefined, 0, req(1, 1000)).state;
    state = reserve(state, 0, req(1, 1000)).state; // waits 100 ms
    state = cancel(state, 10, { ...shape, cost: 1 }).state;
    expect(reserve(state, 10, req(1, 1000)).result.delayMs).toBe(90);
    expect(
      cancel({ tat: 50 }, 10, { ...shape, cost: 1 }).state,
      'drained: nothing left to keep',
    ).toBeUndefined();
  });
});
