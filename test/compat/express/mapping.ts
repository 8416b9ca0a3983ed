/**
 * The thin mapping the express-rate-limit suite runs through (ported from express-rate-limit
 * 3828a5b61c90e3134451ab32e88e61072dbf19f5, test/library/).
 *
 * - `rateLimit` is tokenlease's `tokenlease/express` default export, called with the peer's own
 *   options: without a `limiter`, it builds a fixed-window policy from `windowMs`/`limit` (or
 *   `max`) whose windows open at a client's first request, exact, on a tokenlease `MemoryStore`.
 *   Every other option is passed under the same name.
 * - `jest.*` is `vi.*` (fake timers fake `Date` too, so the limiter's clock follows them).
 * - Tests of express-rate-limit's own `Store` interface (mock stores counting calls to
 *   `increment`/`decrement`), its internal helpers and its `Validations` class are listed as not
 *   applicable, with the reason; test/compat/express/behaviour.test.ts checks the behaviour
 *   they stand for through requests.
 */
export { default as rateLimit, ipKeyGenerator } from '../../../src/http/express.js';
