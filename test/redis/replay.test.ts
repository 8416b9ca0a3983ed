import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisStore, StoreTimeoutError } from '../../src/index.js';
import { luaScript } from '../../src/scripts.js';
import { tokenBucketAcquire } from '../../src/stores/tokenBucketOps.js';
import { storedLevel } from '../support/bucketState.js';
import { closeAllClients, trackClient } from '../support/clients.js';
import { eventually } from '../support/eventually.js';
import { type RedisProcess, startRedis } from '../support/redisServer.js';

const delay = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const bucket = { rate: 1, periodMs: 86_400_000, burst: 100 };
const lease = { ...bucket, want: 10, min: 10, ahead: 0 };

let server: RedisProcess;
beforeAll(async () => {
  server = await startRedis();
});
afterAll(async () => {
  await closeAllClients();
  await server.stop();
});

async function level(admin: Redis, key: string): Promise<number> {
  // Rounded: the bucket refills 1 token a day, a few millionths of a token during the test.
  return Math.round((await storedLevel(admin, key, bucket.burst)) * 1000) / 1000;
}

/**
 * The dangerous sequence: Redis stalls (SIGSTOP) with a lease in its socket, the caller times out,
 * the connection resets (network blip), Redis resumes and runs the lease that was already sent.
 * A client that re-sends unanswered commands on reconnect then runs it a second time.
 */
async function stallAndReset(socket: () => { destroy(): void } | undefined, call: () => Promise<unknown>) {
  process.kill(server.pid, 'SIGSTOP');
  try {
    const outcome = call().then(
      () => 'answered',
      (err: unknown) => err,
    );
    await delay(600); // past the call's timeout
    socket()?.destroy();
    await delay(100);
    process.kill(server.pid, 'SIGCONT');
    // Long enough for a reconnect (50 ms) and any replay to land.
    await delay(800);
    return await outcome;
  } finally {
    process.kill(server.pid, 'SIGCONT');
  }
}

describe('a lease call is never replayed blindly', () => {
  it('a timed-out lease is debited at most once after the connection resets (Redis)', async () => {
    const admin = trackClient(new Redis(server.url));
    // The user's client with ioredis defaults: the store runs on a safe duplicate of it.
    const store = new RedisStore({
      client: trackClient(new Redis(server.url)),
      timeoutMs: 250,
      prefix: 'r:',
    });
    await store.ready();
    // Loads the script, so the stalled call is an EVALSHA that really runs (not a NOSCRIPT).
    await admin.script('LOAD', luaScript('batch').source);
    const client = store.client as Redis;
    const outcome = await stallAndReset(
      () => client.stream,
      () => store.run(tokenBucketAcquire, 'safe', lease),
    );
    expect(outcome).toBeInstanceOf(StoreTimeoutError);
    expect(await level(admin, 'r:safe'), 'the lease already sent ran once, and only once').toBe(90);
    // Leasing resumes on the reconnected connection by itself.
    expect((await eventually(() => store.run(tokenBucketAcquire, 'safe', lease))).granted).toBe(10);
    await store.close();
  });

  it('control: ioredis defaults replay the same timed-out call, debiting it twice', async () => {
    const admin = trackClient(new Redis(server.url));
    const raw = trackClient(new Redis(server.url, { commandTimeout: 250 }));
    raw.on('error', () => {});
    await raw.ping();
    const { sha, source } = luaScript('token_bucket_acquire');
    await raw.script('LOAD', source);
    const args = [lease.rate, lease.periodMs, lease.burst, lease.want, lease.min, lease.ahead, ''];
    await stallAndReset(
      () => raw.stream,
      () => raw.evalsha(sha, 1, 'r:raw', ...args),
    );
    expect(await level(admin, 'r:raw'), 'this is the double debit the store settings prevent').toBe(80);
  });
});
