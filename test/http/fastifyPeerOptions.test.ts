/**
 * @fastify/rate-limit's options (no `limiter`) that cannot work, given at registration: found in the
 * operator trial, each registered without a word and then failed or vanished per request.
 * `timeWindow: 0` answered every request with a 500 carrying the ConfigError that registration
 * could have thrown; `timeWindow: 'soon'` (no duration) became the default minute; a `keyGenerator`
 * that is not a function answered every request with a 500 TypeError. Now refused when the plugin
 * registers (or the route is added, for route options).
 */
import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import rateLimit from '../../src/http/fastify.js';
import { ConfigError } from '../../src/index.js';

async function registered(options: Record<string, unknown>): Promise<unknown> {
  const app = Fastify();
  try {
    await app.register(rateLimit, options);
    app.get('/', async () => 'ok');
    await app.ready();
    return undefined;
  } catch (err) {
    return err;
  } finally {
    await app.close();
  }
}

describe('@fastify/rate-limit options refused at registration', () => {
  it.each([
    ['timeWindow', { max: 2, timeWindow: 0 }],
    ['timeWindow', { max: 2, timeWindow: 'soon' }],
    ['keyGenerator', { max: 2, keyGenerator: 'x' }],
  ] as const)('a ConfigError naming %s for %o', async (field, options) => {
    const err = await registered(options);
    expect(err, 'registration rejects').toBeInstanceOf(ConfigError);
    expect((err as ConfigError).field).toBe(field);
  });
});
