/**
 * The thin mapping the @fastify/rate-limit suite runs through (ported from @fastify/rate-limit
 * 78a7d41143f5418fef3cfe3ac6b46c944e637dc2, test/).
 *
 * - `rateLimit` is tokenlease's `tokenlease/fastify` default export, registered with the plugin's
 *   own options: without a `limiter`, `max` per `timeWindow` is a fixed-window policy whose windows
 *   open at a client's first request, exact, on a tokenlease `MemoryStore` (or, with the plugin's
 *   `redis` option, a `RedisStore` on that client under `nameSpace`). Every other option is passed
 *   under the same name.
 * - node:test's `test`, `t.plan`, `t.assert` and `mock.timers` come from ./nodeTest.ts (vitest).
 * - Tests of the plugin's own store interface (`store: CustomStore`) are listed as not applicable.
 */
export { default, normalizeIP } from '../../../src/http/fastify.js';
