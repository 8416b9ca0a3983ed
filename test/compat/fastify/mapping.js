/**
 * The thin mapping the @fastify/rate-limit suite runs through (ported from @fastify/rate-limit
 * 78a7d41143f5418fef3cfe3ac6b46c944e637dc2, test/).
 *
 * - `rateLimit` is tokenlease's `tokenlease/fastify` default export, registered with the plugin's
 *   own options: without a `limiter`, `max` per `timeWindow` is a fixed-window policy whose windows
 *   open at a client's first request, exact, on a tokenlease `MemoryStore`, or with the plugin's
 *   `redis` option a `RedisStore` on that client under `nameSpace`. Every other option is passed
 *   under the same name.
 * - The one addition: that `RedisStore` gets a 2 s timeout instead of 50 ms, so a store call on a
 *   loaded CI box is not turned into a fail-policy decision (which these wall-clock tests would
 *   read as a wrong count).
 * - node:test's `test`, `describe`, `t.plan`, `t.assert` and `mock.timers` come from ./nodeTest.ts.
 * - Tests of the plugin's own store interface (`store: CustomStore`) are listed as not applicable.
 */
import plugin, { normalizeIP } from '../../../src/http/fastify.js';
import { RedisStore } from '../../../src/index.js';

function rateLimit(fastify, options) {
  if (!options.redis || options.store) return plugin(fastify, options);
  const store = new RedisStore({
    client: options.redis,
    prefix: options.nameSpace ?? 'fastify-rate-limit-',
    timeoutMs: 2000,
  });
  fastify.addHook('onClose', () => store.close());
  return plugin(fastify, { ...options, store });
}

Object.assign(rateLimit, {
  [Symbol.for('skip-override')]: true,
  [Symbol.for('fastify.display-name')]: 'tokenlease-rate-limit',
});

export { normalizeIP };
export default rateLimit;
