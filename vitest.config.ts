import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    // test/compat/fastify keeps @fastify/rate-limit's own tests as JavaScript, as written upstream.
    include: ['test/**/*.test.ts', 'test/compat/**/*.test.js'],
    // Starts one shared redis-server and one 3-master cluster for the whole run.
    globalSetup: ['test/support/globalSetup.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Leaves time for the global teardown's TTL scan and server shutdown.
    teardownTimeout: 30_000,
    // Forks rather than threads: fault tests spawn and signal child processes.
    pool: 'forks',
    fileParallelism: true,
    // CI machines have 2 cores, and each worker also talks to local redis-server processes.
    maxWorkers: 2,
  },
});
