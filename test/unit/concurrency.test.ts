import { describe, expect, it } from 'vitest';
import { acquire, type ConcurrencyState, release, renew } from '../../src/algorithms/concurrency.js';

const req = (want: number, min = want, owner = 'a', limit = 3) => ({
  limit,
  want,
  min,
  ttlMs: 1000,
  owner,
  first: 0,
});

describe('concurrency slots', () => {
  it('grants up to the limit: a block when it fits, what is free when at least min is', () => {
    const a = acquire(undefined, 0, req(2));
    expect(a.result).toEqual({ granted: 2, held: 2, retryMs: 0 });
    expect([...(a.state?.slots.keys() ?? [])]).toEqual(['a:0', 'a:1']);
    const b = acquire(a.state, 100, req(2, 1, 'b'));
    expect(b.result).toEqual({ granted: 1, held: 3, retryMs: 0 });
    const c = acquire(b.state, 200, req(1, 1, 'c'));
    expect(c.result, 'full: retry when the earliest slot expires').toEqual({
      granted: 0,
      held: 3,
      retryMs: 800,
    });
  });

  it('frees released slots and ignores unknown ids', () => {
    const held = acquire(undefined, 0, req(3)).state;
    const r = release(held, 10, { ids: ['a:1', 'zzz:0'] });
    expect(r.result).toBe(2);
    expect(acquire(r.state, 10, req(1, 1, 'b')).result.granted).toBe(1);
    expect(release(held, 10, { ids: ['a:0', 'a:1', 'a:2'] }).state, 'empty set = absent key').toBeUndefined();
  });

  it('expires the slots of a holder that stopped renewing', () => {
    const held = acquire(undefined, 0, req(3)).state;
    expect(acquire(held, 999, req(1, 1, 'b')).result.granted).toBe(0);
    expect(acquire(held, 1000, req(3, 3, 'b')).result.granted).toBe(3);
  });

  it('renews live slots, and reports the ones gone that no longer fit under the limit', () => {
    let state: ConcurrencyState | undefined = acquire(undefined, 0, req(2)).state;
    const r = renew(state, 900, { ids: ['a:0', 'gone:0'], ttlMs: 1000, limit: 2 });
    expect(r.result).toEqual(['gone:0']);
    state = r.state;
    expect(state?.slots.get('a:0')).toBe(1900);
    expect(r.ttlMs, 'the key lives as long as its last slot').toBe(1000);
    expect(acquire(state, 1500, req(3, 1, 'b')).result.granted, 'a:1 expired at 1000').toBe(2);
  });

  it('puts back slots the store lost while they fit under the limit (FLUSHALL, a restart)', () => {
    const flushed = renew(undefined, 500, { ids: ['a:0', 'a:1', 'a:2'], ttlMs: 1000, limit: 2 });
    expect(flushed.result, 'the third does not fit').toEqual(['a:2']);
    expect([...(flushed.state?.slots ?? [])]).toEqual([
      ['a:0', 1500],
      ['a:1', 1500],
    ]);
    expect(acquire(flushed.state, 600, req(1, 1, 'b', 2)).result.granted, 'the limit holds').toBe(0);
    const taken = acquire(undefined, 500, req(1, 1, 'b', 2)).state;
    const renewed = renew(taken, 550, { ids: ['a:0', 'a:1'], ttlMs: 1000, limit: 2 });
    expect(renewed.result, "b took one of a's places meanwhile").toEqual(['a:1']);
    expect(renewed.state?.slots.size).toBe(2);
  });
});
