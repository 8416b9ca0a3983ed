import { describe, expect, it } from 'vitest';
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
