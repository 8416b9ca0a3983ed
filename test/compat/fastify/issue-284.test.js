// Ported from @fastify/rate-limit 78a7d41143f5418fef3cfe3ac6b46c944e637dc2, test/github-issues/issue-284.test.js:
// the original assertions, run through ./mapping.js and ./nodeTest.ts (node:test on vitest).

import Fastify from 'fastify';
import rateLimit from './mapping.js';
import { mock, test } from './nodeTest.js';

test("issue #284 - don't set the reply code automatically", async (t) => {
  const clock = mock.timers;
  clock.enable();
  const fastify = Fastify();

  await fastify.register(rateLimit, {
    global: false,
  });

  fastify.setErrorHandler((err, _req, res) => {
    t.assert.deepStrictEqual(res.statusCode, 200);
    t.assert.deepStrictEqual(err.statusCode, 429);

    res.redirect('/');
  });

  fastify.get(
    '/',
    {
      config: {
        rateLimit: {
          max: 1,
          timeWindow: 5000,
          continueExceeding: true,
        },
      },
    },
    async () => {
      return 'hello!';
    },
  );

  const firstOkResponse = await fastify.inject({
    url: '/',
    method: 'GET',
  });
  const firstRateLimitResponse = await fastify.inject({
    url: '/',
    method: 'GET',
  });

  // After this the rate limiter should allow for new requests
  clock.tick(5000);

  const okResponseAfterRateLimitCompleted = await fastify.inject({
    url: '/',
    method: 'GET',
  });

  t.assert.deepStrictEqual(firstOkResponse.statusCode, 200);

  t.assert.deepStrictEqual(firstRateLimitResponse.statusCode, 302);
  t.assert.deepStrictEqual(firstRateLimitResponse.headers['x-ratelimit-limit'], '1');
  t.assert.deepStrictEqual(firstRateLimitResponse.headers['x-ratelimit-remaining'], '0');
  t.assert.deepStrictEqual(firstRateLimitResponse.headers['x-ratelimit-reset'], '5');

  t.assert.deepStrictEqual(okResponseAfterRateLimitCompleted.statusCode, 200);
  clock.reset(0);
});
