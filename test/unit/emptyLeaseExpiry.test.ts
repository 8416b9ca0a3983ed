import { describe, expect, it } from 'vitest';
import type { Limiter } from '../../src/index.js';
import { settle, virtualFleet } from '../support/virtualFleet.js';

const bucket = { algorithm: 'token-bucket' as const, rate: 100, period: '1s' as const, burst: 100 };

/**
 * A key that was leased while its bucket was below half and then, refilled, got an allowance: the
 * lease, spent to the last token, expires a lease time later. The fleet bench's keys near their
 * limit move between the two regimes all the time.
 */
async function leasedThenAllowed() {
  const { clock, members } = await virtualFleet(bucket, [true, false]);
  const [a, leaser] = members as [Limiter, Limiter];
  // The bucket refilled while the fleet was counted: the leaser takes it down to 40, hands back.
  for (let i = 0; i < 60; i++) expect((await leaser.consume('p', 'k')).allowed).toBe(true);
  await leaser.close();
  await settle();
  // Below half: A's first sight, then a lease of one token, spent at once.
  expect((await a.consume('p', 'k')).allowed).toBe(true);
  await settle();
  expect((await a.consume('p', 'k')).allowed).toBe(true);
  await settle();
  expect(a.stats().tokensLeased).toBe(1);
  // Refilled above half: A's next call brings an allowance; the spent lease is still held.
  clock.advance(200);
  expect((await a.consume('p', 'k')).allowed).toBe(true);
  await settle();
  expect(a.stats().tokensAllowed).toBeGreaterThan(1);
  return { a, clock };
}

describe('an expired lease with nothing left in it', () => {
  it('keeps the allowance and costs no store call', async () => {
    const { a, clock } = await leasedThenAllowed();
    const reported = a.stats().tokensReported;
    // Past the lease's expiry, but long before usage under the allowance is due to be reported.
    clock.advance(3000);
    a.sweep();
    await settle();
    // Before: the expiry handed back nothing, reported the allowance's usage in a call of its own
    // and gave the allowance up, so the next request waited for another call.
    expect(a.stats().tokensReported).toBe(reported);
    const calls = a.stats().storeCalls;
    const d = a.consume('p', 'k');
    expect((await d).allowed).toBe(true);
    await settle();
    expect(a.stats().storeCalls).toBe(calls);
    await a.close();
  });
});
