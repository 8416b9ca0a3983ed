// Ported from @fastify/rate-limit 78a7d41143f5418fef3cfe3ac6b46c944e637dc2, test/local-store-close.test.js:
// the original assertions, run through ./mapping.js and ./nodeTest.ts (node:test on vitest).

import Fastify from 'fastify';
import rateLimit from './mapping.js';
import { test } from './nodeTest.js';

test('Fastify close on local store', async (t) => {
  t.plan(1);
  const fastify = Fastify();
  await fastify.register(rateLimit, { max: 2, timeWindow: 1000 });
  let counter = 1;
  fastify.addHook('onClose', (_instance, done) => {
    counter++;
    done();
  });
  await fastify.close();
  t.assert.deepStrictEqual(counter, 2);
});
