import { describe, expect, it } from 'vitest';
import expressRateLimit from '../../src/http/express.js';
import { rateLimit } from '../../src/http/index.js';
import { ArgumentError, ConfigError, Limiter, type PolicyConfig } from '../../src/index.js';
import { compilePolicy } from '../../src/policy.js';
import { thrown } from '../support/thrown.js';

// Values JSON.stringify cannot write (a BigInt throws; NaN and Symbol come out as null and
// undefined) used to reach it while an error message was built: a TypeError instead of the error
// naming the field, or a message naming the wrong value.
const odd: [label: string, value: unknown, shown: string][] = [
  ['a BigInt', 10n, '10n'],
  ['a Symbol', Symbol('x'), 'Symbol(x)'],
  ['NaN', Number.NaN, 'NaN'],
];

describe('odd values are named in the error, never a TypeError', () => {
  it.each(odd)('policy option set to %s', (_label, value, shown) => {
    const cases: [PolicyConfig, string][] = [
      [{ algorithm: 'token-bucket', rate: 1, fail: value } as never, 'policies.p.fail'],
      [{ algorithm: 'fixed-window', limit: 1, window: '1s', anchor: value } as never, 'policies.p.anchor'],
      [{ algorithm: value } as never, 'policies.p.algorithm'],
    ];
    for (const [policy, field] of cases) {
      const err = thrown(ConfigError, () => compilePolicy('p', policy));
      expect(err.field).toBe(field);
      expect(err.message, field).toContain(`got ${shown}`);
    }
  });

  it.each(odd)('a policy name that is %s', async (_label, value, shown) => {
    const limiter = new Limiter({ policies: { p: { algorithm: 'token-bucket', rate: 1 } } });
    const err = await limiter.consume(value as string, 'k').then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ArgumentError);
    expect((err as ArgumentError).message).toContain(`unknown policy ${shown}`);
    expect(thrown(ArgumentError, () => limiter.describe(value as string)).field).toBe('policy');
    await limiter.close();
  });
});

describe('a count option shows the value it got', () => {
  // These wrote the value with String(), so a BigInt 10n was reported as "got 10": a valid count.
  it.each([
    [
      'breaker.failures',
      () =>
        new Limiter({
          policies: { p: { algorithm: 'token-bucket', rate: 1 } },
          breaker: { failures: 10n as never },
        }),
    ],
    [
      'offenders.capacity',
      () =>
        new Limiter({
          policies: { p: { algorithm: 'token-bucket', rate: 1 } },
          offenders: { capacity: 10n as never },
        }),
    ],
    [
      'policies.p.limit',
      () => compilePolicy('p', { algorithm: 'fixed-window', limit: 10n as never, window: '1s' }),
    ],
  ])('%s', (field, make) => {
    const err = thrown(ConfigError, make);
    expect(err.field).toBe(field);
    expect(err.message).toContain('got 10n');
  });
});

describe('limits stay where a double counts every token', () => {
  // A token bucket refused rate and burst above 1e15; the other algorithms' limits were only
  // checked to be positive, so a fixed window of 1e16 answered remaining 9999999999999996 after a
  // cost of 3, and a concurrency limit of 1e16 lost the first slot taken.
  const limited: [string, (limit: number) => PolicyConfig][] = [
    ['fixed-window', (limit) => ({ algorithm: 'fixed-window', limit, window: '1m' })],
    ['sliding-window', (limit) => ({ algorithm: 'sliding-window', limit, window: '1m' })],
    ['sliding-log', (limit) => ({ algorithm: 'sliding-log', limit, window: '1m' })],
    ['concurrency', (limit) => ({ algorithm: 'concurrency', limit })],
  ];
  it.each(limited)('%s: a limit of 1e16 or 2^53 + 1 is refused, 1e15 accepted', (_name, policy) => {
    for (const limit of [1e16, 2 ** 53 + 1, 1e300]) {
      const err = thrown(ConfigError, () => compilePolicy('p', policy(limit)));
      expect(err.field).toBe('policies.p.limit');
      expect(err.message).toMatch(/(at most|to) 1000000000000000/);
    }
    expect(compilePolicy('p', policy(1e15)).algorithm).toBe(policy(1).algorithm);
  });

  it('a lease given as a list is refused', () => {
    for (const policy of [
      { algorithm: 'token-bucket', rate: 1, lease: [] },
      { algorithm: 'fixed-window', limit: 1, window: '1s', lease: [] },
      { algorithm: 'concurrency', limit: 1, lease: [] },
    ]) {
      const err = thrown(ConfigError, () => compilePolicy('p', policy as never));
      expect(err.field, policy.algorithm).toBe('policies.p.lease');
    }
  });
});

describe('HTTP options set to a BigInt are named in the error', () => {
  const limiter = () => new Limiter({ policies: { p: { algorithm: 'token-bucket', rate: 1 } } });
  it.each([
    ['apiKeyHeader', { apiKeyHeader: 10n }],
    ['standardHeaders', { standardHeaders: 10n }],
    ['rules[0].name', { rules: [{ policy: 'p', name: 10n }] }],
    ['trustProxy[0]', { trustProxy: [10n] }],
  ])('%s', async (field, options) => {
    const l = limiter();
    const err = thrown(ConfigError, () =>
      rateLimit({ limiter: l, rules: [{ policy: 'p', by: 'apiKey' }], ...(options as object) }),
    );
    expect(err.field).toBe(field);
    expect(err.message).toContain('10n');
    await l.close();
  });

  it('the Express peer options: identifier', () => {
    const err = thrown(ConfigError, () => expressRateLimit({ identifier: 10n as never }));
    expect(err.message).toContain('10n');
  });
});

describe('an option set to null is refused, naming it', () => {
  // `burst: null` and `fail: null` were refused, but `period: null`, `lease: null`,
  // `anchor: null` and `lease: { ttl: null }` quietly meant the default: a plans file's `period:`
  // left empty ran a per-second limit.
  it.each([
    [{ algorithm: 'token-bucket', rate: 5, period: null }, 'policies.p.period'],
    [{ algorithm: 'token-bucket', rate: 5, lease: null }, 'policies.p.lease'],
    [{ algorithm: 'token-bucket', rate: 5, lease: { ttl: null } }, 'policies.p.lease.ttl'],
    [{ algorithm: 'fixed-window', limit: 5, window: '1m', anchor: null }, 'policies.p.anchor'],
    [{ algorithm: 'leaky-bucket', rate: 5, maxWait: null }, 'policies.p.maxWait'],
    [{ algorithm: 'concurrency', limit: 5, slotTtl: null }, 'policies.p.slotTtl'],
  ])('%j', (policy, field) => {
    const err = thrown(ConfigError, () => compilePolicy('p', policy as never));
    expect(err.field).toBe(field);
    expect(err.message).toContain('got null');
  });
});

describe('a rule field the HTTP rules do not have is refused, naming it', () => {
  // A plans file's rule was checked for unknown fields, a rule passed in code was not: a typo
  // such as `weighed: false` left the rule weighted by route cost.
  it.each([
    [{ policy: 'p', weighed: false }, 'rules[0].weighed'],
    [{ policy: 'p', key: 'apiKey' }, 'rules[0].key'],
  ])('%j', async (rule, field) => {
    const l = new Limiter({ policies: { p: { algorithm: 'token-bucket', rate: 1 } } });
    const err = thrown(ConfigError, () => rateLimit({ limiter: l, rules: [rule as never] }));
    expect(err.field).toBe(field);
    expect(err.message).toMatch(/unknown option; expected one of `policy`/);
    await l.close();
  });

  it('a key part that is a BigInt is named in the error', async () => {
    const l = new Limiter({ policies: { p: { algorithm: 'token-bucket', rate: 1 } } });
    const err = thrown(ConfigError, () =>
      rateLimit({ limiter: l, rules: [{ policy: 'p', by: 10n as never }] }),
    );
    expect(err.field).toBe('rules[0].by');
    expect(err.message).toContain('got 10n');
    await l.close();
  });
});
