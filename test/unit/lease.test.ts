import { describe, expect, it } from 'vitest';
import { available, msUntilAvailable, refund, type Segment, take, unused } from '../../src/lease.js';

const seg = (levelBefore: number, size: number, at = 0): Segment => ({
  at,
  levelBefore,
  size,
  ratePerMs: 0.01,
  used: 0,
});

describe('local lease segments', () => {
  it('makes a lease granted from a full bucket usable at once', () => {
    const s = [seg(50, 10)];
    expect(available(s, 0)).toBe(10);
    expect(take(s, 0, 10)).toBe(true);
    expect(s, 'a spent segment is dropped').toHaveLength(0);
  });

  it('makes tokens leased ahead usable only as the shared bucket refills', () => {
    // Granted at level -5: token 1 exists after 600 ms at 0.01 tokens/ms.
    const s = [seg(-5, 3)];
    expect(available(s, 0)).toBe(0);
    expect(take(s, 0, 1)).toBe(false);
    expect(msUntilAvailable(s, 0, 1)).toBeCloseTo(600, 0);
    expect(take(s, 600, 1)).toBe(true);
    expect(unused(s)).toBe(2);
    expect(msUntilAvailable(s, 600, 5), 'more than held').toBe(Number.POSITIVE_INFINITY);
  });

  it('spends oldest segments first and puts refunds back at once', () => {
    const s = [seg(10, 2), seg(10, 3)];
    expect(take(s, 0, 4)).toBe(true);
    expect(unused(s)).toBe(1);
    refund(s, 0, 4);
    expect(available(s, 0)).toBe(5);
  });
});
