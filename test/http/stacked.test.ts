import http from 'node:http';
import { afterAll, describe, expect, it } from 'vitest';
import { rateLimit } from '../../src/http/index.js';
import { Limiter } from '../../src/index.js';

const limiter = new Limiter({
  policies: {
    burst: { algorithm: 'fixed-window', limit: 2, window: '1s', anchor: 'first-hit', lease: 'exact' },
    hourly: { algorithm: 'fixed-window', limit: 100, window: '1h', anchor: 'first-hit', lease: 'exact' },
  },
  sweepIntervalMs: 0,
});
afterAll(() => limiter.close());

describe('stacked limiters on one response (node:http)', () => {
  it.each(['draft-10', 'draft-8'] as const)(
    '%s: the second adds its entries to RateLimit and RateLimit-Policy',
    async (standardHeaders) => {
      const first = rateLimit({ limiter, rules: [{ policy: 'burst' }], standardHeaders });
      const second = rateLimit({ limiter, rules: [{ policy: 'hourly' }], standardHeaders });
      const server = http.createServer(async (req, res) => {
        if (!(await first(req, res)) || !(await second(req, res))) return;
        res.end('ok');
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const { port } = server.address() as { port: number };
      const res = await fetch(`http://127.0.0.1:${port}/`, { headers: { 'x-api-key': standardHeaders } });
      server.close();
      const policy = res.headers.get('ratelimit-policy') ?? '';
      expect(policy.match(/"[a-z]+"/g), policy).toEqual(['"burst"', '"hourly"']);
      expect(res.headers.get('ratelimit')).toMatch(/"burst";.*, "hourly";/);
    },
  );

  it('draft-7 and draft-6 carry one limit: the later limiter replaces the header', async () => {
    const first = rateLimit({ limiter, rules: [{ policy: 'burst' }], standardHeaders: 'draft-7' });
    const second = rateLimit({ limiter, rules: [{ policy: 'hourly' }], standardHeaders: 'draft-7' });
    const headers = new Map<string, unknown>();
    const res = {
      headersSent: false,
      getHeader: (n: string) => headers.get(n.toLowerCase()),
      setHeader: (n: string, v: unknown) => headers.set(n.toLowerCase(), v),
    } as unknown as http.ServerResponse;
    const req = { method: 'GET', url: '/', headers: {}, socket: { remoteAddress: '192.0.2.9' } };
    await first(req as http.IncomingMessage, res);
    await second(req as http.IncomingMessage, res);
    expect(headers.get('ratelimit-policy')).toBe('100;w=3600');
  });
});
