/**
 * `tokenlease/express`'s callback options that are not functions (`keyGenerator: 'ip'`,
 * `skip: true`, `handler: 5`, `requestWasSuccessful: {}`), found in the fourth operator trial:
 * the middleware was built without a word and then failed every request (or every refusal, for
 * `handler`) with a TypeError such as "resolved.skip is not a function". Now a `ConfigError`
 * naming the option when the middleware is built, with or without a `limiter`, as the Fastify
 * plugin refuses them at registration.
 */
import { describe, expect, it } from 'vitest';
import rateLimit from '../../src/http/express.js';
import { ConfigError, Limiter } from '../../src/index.js';

const limiter = new Limiter({ policies: { p: { algorithm: 'token-bucket', rate: 10 } } });

describe('express callback options that are not functions', () => {
  for (const [field, value] of [
    ['keyGenerator', 'ip'],
    ['skip', true],
    ['handler', 5],
    ['requestWasSuccessful', {}],
  ] as const) {
    for (const [mode, base] of [
      ['without a limiter', {}],
      ['with a limiter', { limiter, rules: [{ policy: 'p' }] }],
    ] as const) {
      it(`${field}: ${JSON.stringify(value)} ${mode} is a ConfigError naming it`, () => {
        let thrown: unknown;
        try {
          rateLimit({ ...base, [field]: value } as never);
        } catch (err) {
          thrown = err;
        }
        expect(thrown, `${field} ${mode}`).toBeInstanceOf(ConfigError);
        expect((thrown as ConfigError).field).toBe(field);
      });
    }
  }
});
