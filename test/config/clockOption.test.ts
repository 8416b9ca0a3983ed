/**
 * A `now` option that is a function but not a clock (it returns a string, NaN, undefined, a
 * negative or an absurd time) was accepted, and every decision then came out denied with
 * `remaining: NaN` and `resetMs: NaN`. The clock is read once when it is passed in, and a reading
 * that is not a time is a ConfigError naming `now`.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError, Limiter, MemoryStore, RedisStore } from '../../src/index.js';
import { closeAllClients, redisClient } from '../support/clients.js';
import { thrown } from '../support/thrown.js';

afterAll(closeAllClients);

const policies = { p: { algorithm: 'token-bucket', rate: 10 } } as const;
const notClocks: [string, () => unknown][] = [
  ['a string', () => 'x'],
  ['NaN', () => Number.NaN],
  ['undefined', () => undefined],
  ['a negative time', () => -1],
  ['Infinity', () => Number.POSITIVE_INFINITY],
  ['a time past any Date', () => 1e300],
  ['a BigInt', () => 10n],
  ['nothing: it throws (performance.now passed unbound)', performance.now as () => unknown],
];

describe.each([
  ['Limiter', (now: () => unknown) => new Limiter({ policies, now: now as () => number })],
  ['MemoryStore', (now: () => unknown) => new MemoryStore({ now: now as () => number })],
  ['RedisStore', (now: () => unknown) => new RedisStore({ client: redisClient(), now: now as () => number })],
])('%s', (_, make) => {
  it.each(notClocks)('refuses a now() returning %s, naming `now`', (_, now) => {
    const err = thrown(ConfigError, () => make(now));
    expect(err.field).toBe('now');
    expect(err.message).toMatch(/returned|threw/);
  });
});

it('a virtual clock starting at 0 and the wall clock are fine, and decisions carry numbers', async () => {
  for (const now of [() => 0, Date.now, () => performance.now()]) {
    const limiter = new Limiter({ policies, now });
    const d = await limiter.consume('p', 'k');
    expect(d.allowed).toBe(true);
    expect(Number.isFinite(d.remaining) && Number.isFinite(d.resetMs)).toBe(true);
    await limiter.close();
  }
});
