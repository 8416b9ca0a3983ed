import { describe, expect, it } from 'vitest';
import type { Limiter } from '../../src/index.js';
import { settle, virtualFleet } from '../support/virtualFleet.js';

// One token a day: the level moves only with what the fleet takes.
const bucket = { algorithm: 'token-bucket' as const, rate: 1, period: '1d' as const, burst: 100 };

/** Four instances on one store and a virtual clock, every one counting the whole fleet. */
async function fleetOfFour() {
  const { clock, members } = await virtualFleet(bucket, [true, true, true, false]);
  return { clock, a: members[0]!, leaser: members[3]!, members };
}

/** The number of A's requests, one every 10 s, after which it made its second store call. */
async function requestsBeforeRenewal(a: Limiter, clock: { advance(ms: number): void }): Promise<number> {
  const before = a.stats().storeCalls;
  for (let n = 1; n <= 30; n++) {
    expect((await a.consume('p', 'k')).allowed).toBe(true);
    await settle();
    if (a.stats().storeCalls - before >= 2) return n;
    clock.advance(10_000);
  }
  throw new Error('no renewal within 30 requests');
}

describe('allowance renewal', () => {
  it('a key an instance sees rarely, far from its limit, spends its whole allowance before the next sync', async () => {
    const { clock, a, members } = await fleetOfFour();
    // First sight, then floor(99 / (2 · 4)) = 12 tokens of allowance, all spent before renewing
    // (at a quarter left, the renewal came after 1 + 10 requests and gave up 2 tokens).
    expect(await requestsBeforeRenewal(a, clock)).toBe(1 + 12);
    await Promise.all(members.map((m) => m.close()));
  });

  it('near its limit it is renewed at a quarter left, so usage is not reported late', async () => {
    const { clock, a, leaser, members } = await fleetOfFour();
    for (let i = 0; i < 40; i++) expect((await leaser.consume('p', 'k')).allowed).toBe(true);
    await leaser.close();
    // The level is 60, below three quarters: A's allowance is sized on it, floor(59 / 8) = 7,
    // renewed when 1.75 are left.
    expect(await requestsBeforeRenewal(a, clock)).toBe(1 + 6);
    await Promise.all(members.map((m) => m.close()));
  });
});
