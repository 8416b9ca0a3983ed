// Absolute reset times (`resetTime`, `X-RateLimit-Reset`) count from the limiter's clock at the
// decision when the adapter is given no `now` of its own: a lease hit has just read that clock,
// and a second read of the adapter's own (`Date.now`) cost ~40 ns of its ~0.5 µs per request.
// A decision that came from the store, or a request no enforced rule decided, reads it afresh.
import type { IncomingMessage } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { nodeView, RateLimitCore } from '../../src/http/index.js';
import { Limiter, MemoryStore } from '../../src/index.js';

const request = (ip: string) =>
  ({ method: 'GET', url: '/', headers: {}, socket: { remoteAddress: ip } }) as unknown as IncomingMessage;

/** A virtual clock far from the wall clock, so a reset time counted from `Date.now` shows. */
const START = 1_000_000_000_000;

const limiters: Limiter[] = [];
afterEach(async () => {
  for (const l of limiters.splice(0)) await l.close();
});

function setup(rules: { policy: string; shadow?: boolean }[]) {
  const clock = { t: START };
  const now = () => clock.t;
  const limiter = new Limiter({
    store: new MemoryStore({ now }),
    now,
    sweepIntervalMs: 0,
    policies: { p: { algorithm: 'token-bucket', rate: 10, period: '10s', burst: 10 } },
  });
  limiters.push(limiter);
  const core = new RateLimitCore({ limiter, rules, legacyHeaders: true }, nodeView);
  return { clock, core };
}

const legacyReset = (headers: readonly [string, string][]) =>
  Number(headers.find(([n]) => n === 'X-RateLimit-Reset')?.[1]);

describe('reset times without a `now` option', () => {
  it("a lease hit's count from the limiter's clock as it decided", async () => {
    const { clock, core } = setup([{ policy: 'p' }]);
    await core.check(request('192.0.2.1'));
    clock.t += 2_000;
    // Decided from the lease, in this call: 2 tokens spent of 10 refilling at 1/s.
    const hit = await core.check(request('192.0.2.1'));
    expect(hit.info?.resetTime?.getTime()).toBe(clock.t + hit.info!.rules[0]!.decision!.resetMs);
    expect(legacyReset(hit.headers)).toBe(Math.ceil(clock.t / 1000) + 1);
  });

  it('a decision from the store counts from when its answer came', async () => {
    const { clock, core } = setup([{ policy: 'p' }]);
    // The first sight of a key waits for the store; time passes before its answer is applied.
    const first = core.check(request('192.0.2.2'));
    clock.t += 5_000;
    const outcome = await first;
    expect(outcome.info?.resetTime?.getTime()).toBe(clock.t + outcome.info!.rules[0]!.decision!.resetMs);
  });

  it('a request only shadow rules decide reads the clock for itself', async () => {
    const { clock, core } = setup([{ policy: 'p', shadow: true }]);
    // The shadow rule's own decision leaves a clock read behind; the next request must not use it.
    await core.check(request('192.0.2.3'));
    clock.t += 7_000;
    const outcome = await core.check(request('192.0.2.3'));
    expect(outcome.info?.resetTime?.getTime()).toBe(clock.t + outcome.info!.rules[0]!.decision!.resetMs);
  });
});
