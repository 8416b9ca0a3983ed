import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Limiter, RedisStore, StoreError } from '../../src/index.js';
import { closeAllClients, trackClient } from '../support/clients.js';
import { freePort, type RedisProcess, startRedis } from '../support/redisServer.js';

// An operator's first start against a Redis that will never let the store in: `await store.ready()`
// used to wait forever (ioredis reconnects after every refused AUTH), so the gateway hung at startup
// with nothing but the client's 'error' events to go on.

let server: RedisProcess | undefined;
beforeAll(async () => {
  server = await startRedis();
  // Set after start: the helper's own readiness check connects without a password.
  const admin = new Redis(server.url);
  await admin.config('SET', 'requirepass', 'right-password');
  admin.disconnect();
});
afterAll(async () => {
  await closeAllClients();
  await server?.stop();
});

/** `promise`'s outcome, or 'still pending' after `ms`. */
async function within(promise: Promise<unknown>, ms: number): Promise<unknown> {
  let timer: NodeJS.Timeout | undefined;
  const pending = new Promise((resolve) => {
    timer = setTimeout(() => resolve('still pending'), ms);
  });
  try {
    return await Promise.race([
      promise.then(
        () => 'resolved',
        (err: unknown) => err,
      ),
      pending,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

function client(options: { port: number; password?: string }): Redis {
  const c = trackClient(new Redis({ host: '127.0.0.1', ...options }));
  c.on('error', () => {});
  return c;
}

// Concurrent: the bounded wait takes its full 10 s, the others need not queue behind it.
describe.concurrent('ready() on a Redis that refuses the store', () => {
  it.each([
    ['a wrong password', 'wrong-password', /WRONGPASS/],
    ['no password', undefined, /NOAUTH/],
  ])('rejects at once with a StoreError saying so, for %s', async (_, password, reply) => {
    const store = new RedisStore({ client: client({ port: server!.port, password }) });
    const outcome = await within(store.ready(), 5000);
    expect(outcome).toBeInstanceOf(StoreError);
    expect((outcome as StoreError).message).toMatch(/authentication/i);
    expect((outcome as StoreError).message).toMatch(reply);
    // The store keeps answering through the fail policy meanwhile, as for any outage.
    const limiter = new Limiter({ store, policies: { p: { algorithm: 'token-bucket', rate: 10 } } });
    expect((await limiter.consume('p', 'k')).source).toBe('fallback');
    await limiter.close();
    await store.close();
  });

  it('rejects after a bounded wait when nothing listens on the port', async () => {
    const store = new RedisStore({ client: client({ port: await freePort() }), timeoutMs: 50 });
    // 20 tries of at least 500 ms, as for a Cluster master that does not answer.
    const outcome = await within(store.ready(), 12_000);
    expect(outcome).toBeInstanceOf(StoreError);
    expect((outcome as StoreError).message).toMatch(/not ready after 10000 ms/);
    await store.close();
  }, 15_000);

  it('resolves with the right password', async () => {
    const store = new RedisStore({ client: client({ port: server!.port, password: 'right-password' }) });
    expect(await within(store.ready(), 5000)).toBe('resolved');
    await store.close();
  });
});
