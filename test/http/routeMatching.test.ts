import { once } from 'node:events';
import http from 'node:http';
import express from 'express';
import Fastify from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { rateLimit as expressRateLimit } from '../../src/http/express.js';
import { rateLimitPlugin } from '../../src/http/fastify.js';
import { rateLimit as nodeRateLimit, RouteTable } from '../../src/http/index.js';
import { memoryLimiter, rawRequest, tokenBucket, virtualClock } from './servers.js';

let closers: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  await Promise.all(closers.map((c) => c()));
  closers = [];
});

/** Sends one request with the target exactly as given (fetch would normalise it) and returns its status. */
async function send(port: number, method: string, target: string): Promise<number> {
  const head = `${method} ${target} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`;
  return (await rawRequest(port, Buffer.from(head, 'latin1'))).status;
}

/** The rules of the README's Express example: 1 report per minute, export costs 100 of 300 per hour. */
function readmeLimits() {
  const clock = virtualClock();
  const limiter = memoryLimiter(
    { reports: tokenBucket(1, '1m', 1), exports: tokenBucket(300, '1h', 300) },
    clock.now,
  );
  closers.push(() => limiter.close());
  return {
    limiter,
    rules: [
      { policy: 'reports', routes: ['POST /reports'] },
      { policy: 'exports', routes: ['GET /export'] },
    ],
    costs: { 'GET /export': 100 },
    now: clock.now,
  };
}

async function listen(server: http.Server): Promise<number> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  closers.push(() => new Promise((resolve) => server.close(resolve)));
  return (server.address() as { port: number }).port;
}

describe('route-scoped rules and costs cannot be bypassed (issue 13 item 9)', () => {
  it('express: POST /Reports (Express routes case-insensitively) and HEAD /export (runs the GET handler) are counted', async () => {
    const app = express();
    app.use(expressRateLimit(readmeLimits()));
    let reports = 0;
    let exports = 0;
    app.post('/reports', (_req, res) => {
      reports++;
      res.end('ok');
    });
    app.get('/export', (_req, res) => {
      exports++;
      res.end('ok');
    });
    const port = await listen(http.createServer(app));
    for (let i = 0; i < 10; i++) await send(port, 'POST', i % 2 ? '/Reports' : '/REPORTS/');
    expect(reports, 'report handler runs against a limit of 1 per minute').toBe(1);
    const heads = [];
    for (let i = 0; i < 5; i++) heads.push(await send(port, 'HEAD', '/export'));
    expect(exports, 'export handler runs within 300 per hour at cost 100').toBe(3);
    expect(heads).toEqual([200, 200, 200, 429, 429]);
  });

  it('fastify: HEAD of a GET route takes the GET route cost and rule', async () => {
    const app = Fastify();
    await app.register(rateLimitPlugin, readmeLimits());
    let exports = 0;
    app.get('/export', async () => {
      exports++;
      return 'ok';
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    closers.push(() => app.close());
    const port = (app.server.address() as { port: number }).port;
    for (let i = 0; i < 5; i++) await send(port, 'HEAD', '/export');
    expect(exports).toBe(3);
  });

  it('node: path variants an upstream routes to /reports are all counted against the /reports rule', async () => {
    const limit = nodeRateLimit(readmeLimits());
    let forwarded = 0;
    const port = await listen(
      http.createServer(async (req, res) => {
        if (!(await limit(req, res))) return;
        forwarded++;
        res.end('ok');
      }),
    );
    const variants = [
      '/reports;x=1',
      '/./reports',
      '/x/../reports',
      '/reports%2F',
      '/reports%2f',
      '//reports',
      '/r%65ports',
      '/%2E/reports',
      '/x/%2e%2e/reports',
      '/Reports',
      'http://upstream/reports?x=1',
    ];
    const statuses = [];
    for (const target of variants) statuses.push(await send(port, 'POST', target));
    expect(statuses, variants.join(' ')).toEqual([200, ...Array(variants.length - 1).fill(429)]);
    expect(forwarded).toBe(1);
  });
});

describe('RouteTable normalisation', () => {
  const table = new RouteTable(
    [
      ['POST /reports', 'reports'],
      ['GET /users/:id', 'user'],
      ['GET /files/*', 'files'],
    ],
    'costs',
  );
  it.each([
    ['POST', '/reports;jsessionid=1', 'reports'],
    ['POST', '/reports/;x', 'reports'],
    ['POST', '/a/b/../../reports', 'reports'],
    ['POST', '/../reports', 'reports'],
    ['POST', '/REPORTS', 'reports'],
    ['POST', '/reports%2F', 'reports'],
    ['HEAD', '/users/7', 'user'],
    ['GET', '/users/7;v=2', 'user'],
    ['GET', '/files/a%2Fb', 'files'],
    ['GET', '/reports', undefined],
    ['POST', '/reports%3B', undefined],
    ['POST', '/reportsx', undefined],
    ['PUT', '/users/7', undefined],
  ])('%s %s -> %s', (method, path, expected) => {
    expect(table.match(method, [path])?.value).toBe(expected);
  });
});
