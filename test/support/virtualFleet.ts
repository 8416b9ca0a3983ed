import { expect } from 'vitest';
import { Limiter, MemoryStore, type TokenBucketPolicy } from '../../src/index.js';

/** Lets the store calls a step started (and what they trigger) run to their end. */
export async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
}

/**
 * Heartbeats on a virtual clock (`advance` moves it) until every limiter counts the whole fleet:
 * from its second beat on, half a second after its first.
 */
export async function countFleet(members: readonly Limiter[], advance: (ms: number) => void): Promise<void> {
  const n = members.length;
  for (let i = 0; i < 20 && members.some((m) => m.stats().fleet !== n); i++) {
    for (const m of members) m.sweep();
    await settle();
    advance(500);
  }
  expect(
    members.map((m) => m.stats().fleet),
    'every instance counts the whole fleet',
  ).toEqual(members.map(() => n));
}

/**
 * Limiters sharing one MemoryStore and a virtual clock (`advance` moves it), one per entry of
 * `writeBehind` (whether it admits policy `p` under allowances), each counting the whole fleet.
 */
export async function virtualFleet(bucket: TokenBucketPolicy, writeBehind: readonly boolean[]) {
  let t = 1_000_000;
  const clock = { now: () => t, advance: (ms: number) => (t += ms) };
  const store = new MemoryStore({ now: clock.now });
  const members = writeBehind.map(
    (admits) =>
      new Limiter({
        store,
        policies: { p: { ...bucket, lease: { writeBehind: admits } } },
        now: clock.now,
        sweepIntervalMs: 0,
      }),
  );
  await countFleet(members, clock.advance);
  return { clock, store, members };
}
