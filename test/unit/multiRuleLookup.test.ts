import { describe, expect, it } from 'vitest';
import { Limiter, MemoryStore } from '../../src/index.js';
import { closedAfterEach } from '../support/closedAfterEach.js';

// A multi-rule consume finds the state of each check after the first through the previous check's
// state (the same checks as last time): these make sure it never finds one the table dropped.

const open = closedAfterEach();

function setup(maxKeys = 100) {
  let t = 1_000_000;
  const now = () => t;
  const l = new Limiter({
    store: new MemoryStore({ now }),
    now,
    sweepIntervalMs: 0,
    maxKeys,
    policies: {
      a: { algorithm: 'token-bucket', rate: 1, period: '1h', burst: 100 },
      b: { algorithm: 'token-bucket', rate: 1, period: '1h', burst: 5 },
    },
  });
  open.push(l);
  const both = (key: string) =>
    l.consume([
      { policy: 'a', key },
      { policy: 'b', key },
    ]);
  return { l, both, advance: (ms: number) => (t += ms) };
}

describe('multi-rule consume, finding each check state', () => {
  it('decides a reset key from its fresh state, not the one it was paired with before', async () => {
    const { l, both } = setup();
    for (let i = 0; i < 3; i++) await both('k');
    // Another key in between, so the next consume of k is not the one remembered as the last.
    await both('other');
    await l.reset('b', 'k');
    const d = await both('k');
    expect(d.checks?.[1]?.remaining, 'b starts over from its burst of 5').toBe(4);
  });

  it('decides an evicted key from its fresh state', async () => {
    // Two rules per key, two states per key: a third key evicts the first's states.
    const { both } = setup(4);
    await both('k');
    await both('k');
    await both('x');
    await both('y');
    const d = await both('k');
    expect(d.allowed).toBe(true);
    // The evicted states handed their tokens back; the fresh ones count from the store again.
    expect(d.checks?.[1]?.remaining, 'b: three of 5 taken').toBe(2);
    expect(d.checks?.[0]?.remaining, 'a: three of 100 taken').toBe(97);
  });
});

describe('consume, finding each check rule by its name', () => {
  it('finds the new rule of a name after the policies change, one rule and several alike', async () => {
    const { l, both } = setup();
    expect((await l.consume('a', 'k')).limit).toBe(100);
    expect((await both('k')).checks?.map((d) => d.limit)).toEqual([100, 5]);
    l.setPolicies({
      a: { algorithm: 'token-bucket', rate: 1, period: '1h', burst: 50 },
      b: { algorithm: 'token-bucket', rate: 1, period: '1h', burst: 7 },
    });
    expect((await l.consume('a', 'k')).limit, 'the changed rule a').toBe(50);
    expect(
      (await both('k')).checks?.map((d) => d.limit),
      'the changed rules',
    ).toEqual([50, 7]);
    l.setPolicies({ b: { algorithm: 'token-bucket', rate: 1, period: '1h', burst: 7 } });
    await expect(l.consume('a', 'k'), 'a removed policy').rejects.toThrow(/unknown policy "a"/);
    await expect(both('k')).rejects.toThrow(/unknown policy "a"/);
  });
});
