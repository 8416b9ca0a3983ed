/**
 * The HTTP layer's own CPU per request, in process (no sockets, no load generator: steady on a
 * shared machine, where server CPU under autocannon is not). Requests are real `IncomingMessage`s
 * answered on real `ServerResponse`s (node:http's own `setHeader` included), one hot client,
 * MemoryStore, limits never reached. Rows, each against `limiter.consume` of the same checks:
 * - 1 rule: node:http's `rateLimit` vs `consume(policy, key)` and vs `consume([check])`;
 * - 3 rules with route costs (100 API keys, IPv6 clients behind a local proxy, 1 request in 10 a
 *   weighted report): `RateLimitCore.check` vs `consume(checks)` of the same checks.
 */
import { IncomingMessage, ServerResponse } from 'node:http';
import type * as Http from '../src/http/index.js';
import type { BenchContext } from './context.js';
import { type BenchOutput, percentSpread, type Row } from './report.js';
import { median, summarize } from './stats.js';
import { type Check, entryPoint, Limiter, MemoryStore } from './tokenlease.js';

const http = await entryPoint<typeof Http>('http');

function request(method: string, url: string, headers: Record<string, string>, ip: string): IncomingMessage {
  const req = new IncomingMessage({ remoteAddress: ip } as never);
  req.method = method;
  req.url = url;
  req.headers = headers;
  return req;
}

/** CPU µs per call of `fn(i)` over `n` sequential awaited calls. */
async function cpuPerCall(n: number, fn: (i: number) => unknown): Promise<number> {
  const start = process.cpuUsage();
  for (let i = 0; i < n; i++) await fn(i);
  const used = process.cpuUsage(start);
  return (used.user + used.system) / n;
}

interface Side {
  readonly label: string;
  readonly run: (i: number) => unknown;
  readonly samples: number[];
}

/** Sides take turns for `rounds` rounds (order rotating) after one warm-up pass each. */
async function rounds(ctx: BenchContext, sides: readonly Side[]): Promise<void> {
  const { rounds: n, calls } = ctx.profile.adapterCpu;
  for (const s of sides) await cpuPerCall(calls, s.run);
  for (let round = 0; round < n; round++) {
    for (let i = 0; i < sides.length; i++) {
      const s = sides[(i + round) % sides.length] as Side;
      s.samples.push(await cpuPerCall(calls, s.run));
    }
  }
}

function rows(caseName: string, base: Side, sides: readonly Side[]): Row[] {
  const baseMedian = median(base.samples);
  return sides.map((s) => {
    const sum = summarize(s.samples);
    const added = sum.median - baseMedian;
    return {
      bench: 'adapter-cpu',
      case: caseName,
      contestant: s.label,
      value: `${sum.median.toFixed(2)} µs`,
      spread: percentSpread(sum),
      vs: s === base ? 'baseline' : `${added >= 0 ? '+' : '−'}${Math.abs(added).toFixed(2)} µs`,
      note: 'process CPU per request, in process',
    };
  });
}

async function oneRule(ctx: BenchContext): Promise<Row[]> {
  const limiter = new Limiter({
    store: new MemoryStore(),
    policies: { 'per-client': { algorithm: 'token-bucket', rate: 1e9, period: '1s', burst: 1e12 } },
  });
  const limit = http.rateLimit({ limiter, rules: [{ policy: 'per-client', by: 'ip' }] });
  const req = request('GET', '/v1/items?page=2', { host: 'api', accept: '*/*' }, '127.0.0.1');
  const check: Check = { policy: 'per-client', key: 'ip=127.0.0.1', cost: 1, route: 'GET /v1/items' };
  // A response per request, as a server has: the adapter adds to rate-limit headers already set
  // (stacked limiters), so one reused response would grow with every call.
  const sides: Side[] = [
    {
      label: "limiter.consume('per-client', key)",
      run: () => limiter.consume('per-client', 'ip=127.0.0.1'),
      samples: [],
    },
    { label: 'limiter.consume([check])', run: () => limiter.consume([check]), samples: [] },
    { label: 'new ServerResponse(req) alone', run: () => new ServerResponse(req), samples: [] },
    {
      label: 'node:http rateLimit adapter (+ its ServerResponse)',
      run: () => limit(req, new ServerResponse(req)),
      samples: [],
    },
  ];
  try {
    await rounds(ctx, sides);
  } finally {
    await limiter.close();
  }
  return rows('1 rule, 1 hot client', sides[0] as Side, sides);
}

async function threeRules(ctx: BenchContext): Promise<Row[]> {
  const policies = {
    'per-key': { algorithm: 'token-bucket', rate: 1e9, period: '1s' },
    daily: { algorithm: 'token-bucket', rate: 1e12, period: '1d' },
    reports: { algorithm: 'token-bucket', rate: 1e9, period: '1m' },
  } as const;
  const limiter = new Limiter({ store: new MemoryStore(), policies });
  const bare = new Limiter({ store: new MemoryStore(), policies });
  const core = new http.RateLimitCore<IncomingMessage>(
    {
      limiter,
      rules: [
        { policy: 'per-key', by: 'apiKey' },
        { policy: 'daily', by: 'apiKey', weighted: false },
        { policy: 'reports', by: ['apiKey', 'route'], routes: ['POST /reports'] },
      ],
      costs: { 'GET /profile': 1, 'POST /reports': 20 },
      trustProxy: ['loopback'],
    },
    http.nodeView,
  );
  const requests = Array.from({ length: 1000 }, (_, i) =>
    request(
      i % 10 === 0 ? 'POST' : 'GET',
      i % 10 === 0 ? '/reports' : '/profile?x=1',
      { 'x-api-key': `k_${i % 100}`, 'x-forwarded-for': `2001:db8:${i % 7}::1` },
      '127.0.0.1',
    ),
  );
  const checks: Check[][] = requests.map((r) => {
    const key = `apiKey=${r.headers['x-api-key']}`;
    const report = r.method === 'POST';
    return [
      { policy: 'per-key', key, cost: report ? 20 : 1 },
      { policy: 'daily', key },
      ...(report ? [{ policy: 'reports', key: `${key}&route=POST /reports`, cost: 20 }] : []),
    ];
  });
  const sides: Side[] = [
    { label: 'limiter.consume(checks)', run: (i) => bare.consume(checks[i % 1000] as Check[]), samples: [] },
    {
      label: 'RateLimitCore.check',
      run: (i) => core.check(requests[i % 1000] as IncomingMessage),
      samples: [],
    },
  ];
  try {
    await rounds(ctx, sides);
  } finally {
    await Promise.all([limiter.close(), bare.close()]);
  }
  return rows('3 rules, route costs, 100 API keys', sides[0] as Side, sides);
}

export async function runAdapterCpu(ctx: BenchContext): Promise<BenchOutput> {
  ctx.log('adapter-cpu: 1 rule');
  const one = await oneRule(ctx);
  ctx.log('adapter-cpu: 3 rules');
  return { rows: [...one, ...(await threeRules(ctx))], targets: [] };
}
