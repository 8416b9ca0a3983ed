import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { storageKey } from '../../src/stores/keys.js';
import { storedLevel } from '../support/bucketState.js';
import { closeAllClients, redisClient, uniquePrefix } from '../support/clients.js';

afterAll(closeAllClients);

const EXAMPLE = fileURLToPath(new URL('../../examples/graceful-shutdown.ts', import.meta.url));
const TSX = fileURLToPath(new URL('../../node_modules/tsx/dist/esm/index.mjs', import.meta.url));
const BURST = 10_000; // the example's policy: 10 000 requests a day
const MAX_LEASE = BURST / 10;

/** Starts the example gateway as a real process and resolves with its port. */
async function startGateway(prefix: string): Promise<{ child: ChildProcess; port: number }> {
  const child = spawn(process.execPath, ['--import', TSX, EXAMPLE], {
    // A generous timeout: the exact accounting below assumes no lease call times out on a busy CI box.
    env: {
      ...process.env,
      REDIS_URL: inject('redisUrl'),
      KEY_PREFIX: prefix,
      PORT: '0',
      REDIS_TIMEOUT_MS: '2000',
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const m = /listening (\d+)/.exec(out);
      if (m) resolve(Number(m[1]));
    });
    child.once('exit', (code) => reject(new Error(`gateway exited with ${code} before listening: ${out}`)));
  });
  return { child, port };
}

async function traffic(port: number, requests: number): Promise<number> {
  let admitted = 0;
  for (let i = 0; i < requests; i++) {
    const res = await fetch(`http://127.0.0.1:${port}/?key=client-42`);
    await res.arrayBuffer();
    if (res.status === 200) admitted++;
  }
  return admitted;
}

describe('shutdown', () => {
  it('the SIGTERM recipe hands every unused leased token back', async () => {
    const prefix = uniquePrefix('sigterm');
    const bucket = prefix + storageKey('token-bucket', 'daily', 'client-42');
    const redis = redisClient();
    const level = () => storedLevel(redis, bucket, BURST);

    const { child, port } = await startGateway(prefix);
    const admitted = await traffic(port, 200);
    expect(admitted).toBe(200);
    // Before the shutdown the store is off by what the gateway holds: leased tokens it has not spent
    // (the level is lower) or usage under an allowance it has not reported yet (higher).
    expect(
      Math.abs(BURST - (await level()) - admitted),
      'the gateway holds something to settle',
    ).toBeGreaterThan(0);

    const exited = once(child, 'exit');
    child.kill('SIGTERM');
    const [code] = await exited;
    expect(code, 'clean exit').toBe(0);
    // 10 000 a day refill about 0.1 token a second while the test runs.
    expect(await level()).toBeCloseTo(BURST - admitted, 0);
  });

  it('a crashed gateway loses at most its outstanding lease, which the bucket refills', async () => {
    const prefix = uniquePrefix('crash');
    const bucket = prefix + storageKey('token-bucket', 'daily', 'client-42');
    const redis = redisClient();
    const { child, port } = await startGateway(prefix);
    const admitted = await traffic(port, 200);
    const exited = once(child, 'exit');
    child.kill('SIGKILL');
    await exited;
    const lost = BURST - admitted - (await storedLevel(redis, bucket, BURST));
    // Leased tokens it had not spent: one lease (at most maxLease) plus the refill-ahead started
    // when a quarter of it was left.
    expect(lost, 'the unspent part of its leases').toBeLessThanOrEqual(1.25 * MAX_LEASE);
    // Or, once it decided under an allowance, usage it had not reported yet: at most the allowance,
    // a quarter of the burst (docs/architecture.md "Guarantees").
    expect(-lost, 'admitted and never reported').toBeLessThanOrEqual(BURST / 4);
  });
});
