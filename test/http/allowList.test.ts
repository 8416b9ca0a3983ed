import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Plans } from '../../src/http/plans.js';
import { ADAPTERS, memoryLimiter, type Running, startServer, tokenBucket, virtualClock } from './servers.js';

let servers: Running[] = [];
afterEach(async () => {
  await Promise.all(servers.map((s) => s.close()));
  servers = [];
});

async function statuses(url: string, n: number, headers: Record<string, string>): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push((await fetch(`${url}/profile`, { headers })).status);
  return out;
}
const count = (xs: number[], status: number) => xs.filter((s) => s === status).length;

describe('allowList matches only identities someone vouched for (issue 13 item 10)', () => {
  for (const adapter of ADAPTERS) {
    it(`${adapter}: a raw X-API-Key equal to an allow-listed client key is counted like any request`, async () => {
      const clock = virtualClock();
      const limiter = memoryLimiter({ p: tokenBucket(5, '1m', 5) }, clock.now);
      const server = await startServer(adapter, {
        limiter,
        rules: [{ policy: 'p' }],
        allowList: ['internal-batch'],
        now: clock.now,
      });
      servers.push(server);
      const got = await statuses(server.url, 50, { 'x-api-key': 'internal-batch' });
      expect(count(got, 200), '50 requests against 5/min').toBe(5);
      expect(count(got, 429)).toBe(45);
      await limiter.close();
    });
  }

  it('the same entry lets through the client that keyGenerator authenticated as internal-batch', async () => {
    const clock = virtualClock();
    const limiter = memoryLimiter({ p: tokenBucket(5, '1m', 5) }, clock.now);
    const server = await startServer('node', {
      limiter,
      rules: [{ policy: 'p' }],
      allowList: ['internal-batch'],
      // Stands in for the gateway's authentication: only the right secret makes the identity.
      keyGenerator: (req) => (req.headers.authorization === 'Bearer s3cret' ? 'internal-batch' : undefined),
      now: clock.now,
    });
    servers.push(server);
    expect(count(await statuses(server.url, 20, { authorization: 'Bearer s3cret' }), 200)).toBe(20);
    expect(count(await statuses(server.url, 20, { 'x-api-key': 'internal-batch' }), 200)).toBe(5);
    await limiter.close();
  });

  it('with a plans file: a listed API key may be allow-listed, an unlisted one is not, deny lists match either', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tokenlease-allow-'));
    const path = join(dir, 'plans.yaml');
    writeFileSync(
      path,
      `defaultPlan: free
plans:
  free:
    rules:
      per-client: { rate: 5, period: 1m, burst: 5 }
keys:
  k_monitor: free
allow: [k_monitor, internal-batch]
deny: [k_revoked]
`,
    );
    const plans = Plans.fromFile(path);
    const clock = virtualClock();
    const limiter = memoryLimiter(plans.policies, clock.now);
    const server = await startServer('node', { limiter, plans, now: clock.now });
    servers.push(server);
    expect(count(await statuses(server.url, 20, { 'x-api-key': 'k_monitor' }), 200), 'listed').toBe(20);
    expect(count(await statuses(server.url, 20, { 'x-api-key': 'internal-batch' }), 200), 'unlisted').toBe(5);
    expect(count(await statuses(server.url, 3, { 'x-api-key': 'k_revoked' }), 403), 'deny').toBe(3);
    await limiter.close();
  });
});
