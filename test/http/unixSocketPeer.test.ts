/**
 * A `node:http` server listening on a unix-domain socket (behind nginx's
 * `proxy_pass http://unix:/run/app.sock`, a common set-up) sees no peer address on any request.
 * Found in the fourth operator trial: even with `trustProxy: true` the `X-Forwarded-For` the proxy
 * sent was ignored, and every client was counted in one `ip=unknown` bucket, so the first client
 * to spend the limit refused everyone. A peer without an address is now trusted as Express's
 * `trust proxy` trusts it: by `true` and by a hop count, not by a list of addresses.
 */

import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RateLimitInfo } from '../../src/http/core.js';
import { rateLimit } from '../../src/http/index.js';
import { Limiter } from '../../src/index.js';

const dir = mkdtempSync(join(tmpdir(), 'tl-unix-'));
const servers: http.Server[] = [];
afterAll(async () => {
  await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
  rmSync(dir, { recursive: true, force: true });
});

/** A server on its own socket path, limiting by IP at burst 1, answering with the client key. */
async function unixServer(name: string, trustProxy: boolean | number | string[] | undefined) {
  const limiter = new Limiter({
    policies: { p: { algorithm: 'token-bucket', rate: 1, period: '1h', burst: 1 } },
    sweepIntervalMs: 0,
  });
  const limit = rateLimit({ limiter, rules: [{ policy: 'p', by: 'ip' }], trustProxy });
  const server = http.createServer(async (req, res) => {
    if (!(await limit(req, res))) return;
    res.end(String((req as { rateLimit?: RateLimitInfo }).rateLimit?.key));
  });
  const path = join(dir, name);
  await new Promise<void>((resolve) => server.listen(path, resolve));
  servers.push(server);
  const get = (forwardedFor: string) =>
    new Promise<string>((resolve, reject) => {
      const r = http.request({ socketPath: path, headers: { 'x-forwarded-for': forwardedFor } }, (res) => {
        let body = '';
        res.on('data', (chunk) => {
          body += chunk;
        });
        res.on('end', () => resolve(`${res.statusCode} ${res.statusCode === 200 ? body : ''}`.trim()));
      });
      r.on('error', reject);
      r.end();
    });
  return get;
}

describe('a server on a unix-domain socket behind a proxy', () => {
  let clients: Record<string, (forwardedFor: string) => Promise<string>>;
  beforeAll(async () => {
    clients = {
      true: await unixServer('true.sock', true),
      hops: await unixServer('hops.sock', 1),
      list: await unixServer('list.sock', ['loopback']),
      none: await unixServer('none.sock', undefined),
    };
  });

  it('with trustProxy true, each client is counted by its X-Forwarded-For address', async () => {
    expect(await clients.true!('203.0.113.1')).toBe('200 ip=203.0.113.1');
    expect(await clients.true!('203.0.113.2'), 'another client, its own bucket').toBe('200 ip=203.0.113.2');
    expect(await clients.true!('203.0.113.1'), 'the first client, its bucket spent').toBe('429');
  });

  it('with a hop count, the socket peer is the first hop', async () => {
    expect(await clients.hops!('198.51.100.7, 203.0.113.1')).toBe('200 ip=203.0.113.1');
    expect(await clients.hops!('203.0.113.2')).toBe('200 ip=203.0.113.2');
  });

  it('a list of addresses does not trust a peer without one (as Express): one bucket for all', async () => {
    expect(await clients.list!('203.0.113.1')).toBe('200 ip=unknown');
    expect(await clients.list!('203.0.113.2')).toBe('429');
    expect(await clients.none!('203.0.113.1')).toBe('200 ip=unknown');
    expect(await clients.none!('203.0.113.2')).toBe('429');
  });
});
