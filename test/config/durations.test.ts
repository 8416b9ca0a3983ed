import { afterAll, describe, expect, it } from 'vitest';
import { MAX_TTL_MS } from '../../src/algorithms/tokenBucket.js';
import { MAX_DURATION_MS, MAX_TIMER_MS } from '../../src/duration.js';
import { ConfigError, Limiter, type PolicyConfig, RedisStore } from '../../src/index.js';
import { compilePolicy } from '../../src/policy.js';
import { closeAllClients, redisClient, uniquePrefix } from '../support/clients.js';
import { thrown } from '../support/thrown.js';

afterAll(closeAllClients);

/** Every duration of every algorithm, with a policy to put it in (issue 13 item 13). */
const FIELDS: [field: string, policy: (d: unknown) => PolicyConfig][] = [
  ['period', (d) => ({ algorithm: 'token-bucket', rate: 10, period: d }) as PolicyConfig],
  ['lease.ttl', (d) => ({ algorithm: 'token-bucket', rate: 10, lease: { ttl: d } }) as PolicyConfig],
  ['lease.horizon', (d) => ({ algorithm: 'token-bucket', rate: 10, lease: { horizon: d } }) as PolicyConfig],
  ['lease.ahead', (d) => ({ algorithm: 'token-bucket', rate: 10, lease: { ahead: d } }) as PolicyConfig],
  ['window', (d) => ({ algorithm: 'fixed-window', limit: 10, window: d }) as PolicyConfig],
  [
    'lease.ttl',
    (d) => ({ algorithm: 'fixed-window', limit: 10, window: '1m', lease: { ttl: d } }) as PolicyConfig,
  ],
  ['window', (d) => ({ algorithm: 'sliding-window', limit: 10, window: d }) as PolicyConfig],
  [
    'lease.horizon',
    (d) => ({ algorithm: 'sliding-window', limit: 10, window: '1m', lease: { horizon: d } }) as PolicyConfig,
  ],
  ['window', (d) => ({ algorithm: 'sliding-log', limit: 10, window: d }) as PolicyConfig],
  ['period', (d) => ({ algorithm: 'leaky-bucket', rate: 10, period: d }) as PolicyConfig],
  ['maxWait', (d) => ({ algorithm: 'leaky-bucket', rate: 10, maxWait: d }) as PolicyConfig],
  ['slotTtl', (d) => ({ algorithm: 'concurrency', limit: 10, slotTtl: d }) as PolicyConfig],
  ['lease.ttl', (d) => ({ algorithm: 'concurrency', limit: 10, lease: { ttl: d } }) as PolicyConfig],
];

const rejection = (run: () => unknown) => thrown(ConfigError, run);

describe('durations are validated like rates', () => {
  const absurd = [1e-300, 0.5, 1e13, 1e300, '0.1ms', '100000000d'];
  for (const [field, policy] of FIELDS) {
    const algorithm = policy(1).algorithm;
    it.each(absurd)(`${algorithm} ${field}: %j is refused, naming the field and the range`, (d) => {
      const err = rejection(() => compilePolicy('p', policy(d)));
      expect(err.field).toBe(`policies.p.${field}`);
      expect(err.code).toBe('ERR_TOKENLEASE_CONFIG');
      expect(err.message).toMatch(/expected (a duration from 1 ms to \d+ ms|at most)/);
    });
  }

  it('the message says the accepted range', () => {
    expect(rejection(() => compilePolicy('p', FIELDS[4]![1](1e-300))).message).toBe(
      'Invalid `policies.p.window`: expected a duration from 1 ms to 1000000000000 ms (about 31.7 years), got 1e-300 ms',
    );
    expect(rejection(() => compilePolicy('p', FIELDS[10]![1]('30d'))).message).toBe(
      'Invalid `policies.p.maxWait`: expected a duration from 1 ms to 2147483647 ms (about 24.9 days), got 2592000000 ms',
    );
  });

  it('timers: maxWait and the breaker cool-down stop where a Node timer stops', () => {
    expect(() => compilePolicy('p', FIELDS[10]![1](MAX_TIMER_MS))).not.toThrow();
    expect(rejection(() => compilePolicy('p', FIELDS[10]![1](MAX_TIMER_MS + 1))).field).toBe(
      'policies.p.maxWait',
    );
    const policies = { p: { algorithm: 'token-bucket' as const, rate: 1 } };
    expect(rejection(() => new Limiter({ policies, breaker: { coolDown: '30d' } })).field).toBe(
      'breaker.coolDown',
    );
    expect(rejection(() => new Limiter({ policies, offenders: { halfLife: 1e13 } })).field).toBe(
      'offenders.halfLife',
    );
  });

  it('the bound keeps stored TTLs inside MAX_TTL_MS', () => {
    // A sliding window's key lives for two windows.
    expect(2 * MAX_DURATION_MS).toBeLessThan(MAX_TTL_MS);
  });
});

describe('the duration grammar: a decimal number, at most one space, then ms, s, m, h or d', () => {
  // The forms the docs list ('250ms', '1s'), a fraction, and '1 s' as @upstash/ratelimit spells its
  // durations (and as the `Duration` type, `${number}${unit}`, already admits).
  it.each([
    ['250ms', 250],
    ['1.5s', 1500],
    ['1 s', 1000],
    ['10 m', 600_000],
    ['2h', 7_200_000],
    ['1d', 86_400_000],
    [1000, 1000],
  ])('%j is %d ms', (period, ms) => {
    const rule = compilePolicy('p', { algorithm: 'token-bucket', rate: 1, period } as PolicyConfig);
    expect(rule.algorithm === 'token-bucket' && rule.periodMs).toBe(ms);
  });

  // Spellings that some other parser reads differently or not at all: refused rather than guessed.
  it.each(['1  s', ' 1s', '1s ', '1\ts', '1\ns', '1S', '1 sec', '1 minute', '1e3ms', '.5s', '1', 's', ''])(
    '%j is refused, naming the field',
    (period) => {
      const err = rejection(() =>
        compilePolicy('p', { algorithm: 'token-bucket', rate: 1, period } as PolicyConfig),
      );
      expect(err.field).toBe('policies.p.period');
      expect(err.message).toContain("expected a duration like '250ms', '1s', '1m', '1h' or '1d'");
    },
  );
});

describe('the longest accepted durations on real Redis', () => {
  it('every key written gets a TTL no longer than two of the longest windows', async () => {
    const prefix = uniquePrefix('durations');
    const client = redisClient();
    const store = new RedisStore({ client, prefix });
    await store.ready();
    const longest = MAX_DURATION_MS;
    const limiter = new Limiter({
      store,
      sweepIntervalMs: 0,
      policies: {
        tb: { algorithm: 'token-bucket', rate: 1, period: longest, lease: 'exact' },
        fw: { algorithm: 'fixed-window', limit: 10, window: longest, lease: 'exact' },
        sw: { algorithm: 'sliding-window', limit: 10, window: longest, lease: 'exact' },
        sl: { algorithm: 'sliding-log', limit: 10, window: longest },
        lb: { algorithm: 'leaky-bucket', rate: 1, period: longest, burst: 1, maxWait: 0 },
        cc: { algorithm: 'concurrency', limit: 10, slotTtl: longest, lease: 'exact' },
      },
    });
    for (const p of ['tb', 'fw', 'sw', 'sl', 'lb']) {
      expect((await limiter.consume(p, 'k')).allowed, p).toBe(true);
    }
    const slot = await limiter.acquire('cc', 'k');
    const keys = await client.keys(`${prefix}*`);
    expect(keys.length, 'one key per policy').toBeGreaterThanOrEqual(6);
    for (const key of keys) {
      const ttl = await client.pttl(key);
      expect(ttl, `${key} expires`).toBeGreaterThan(0);
      expect(ttl, `${key} TTL`).toBeLessThanOrEqual(2 * longest);
    }
    await slot.release();
    await limiter.close();
    await store.close();
  });
});
