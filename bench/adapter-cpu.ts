/**
 * The HTTP layer's own CPU per request, in process (no sockets, no load generator: steady on a
 * shared machine, where server CPU under autocannon is not). Requests are real `IncomingMessage`s
 * answered on real `ServerResponse`s (node:http's own `setHeader` included), one hot client,
 * MemoryStore, limits never reached. Rows, each against `limiter.consume` of the same checks:
 * - 1 rule: node:http's `rateLimit` vs `consume(policy, key)` and vs `consume([check])`;
 * - 3 rules with route costs (100 API keys, IPv6 clients behind a local proxy, 1 request in 10 a
 *   weighted report): `RateLimitCore.check` vs `consume(checks)` of the same checks.
 * And, for node:http, Express and Fastify alike, the whole app of bench/adapter.ts (the same code,
 * bench/adapter-apps.ts) answering a fresh request each time, without a limiter, with the Map
 * bucket sending the same headers, awaiting `limiter.consume`, and with the adapter: each
 * adapter's CPU over its framework, and over the Map server the throughput target compares with.
 */
import { IncomingMessage, ServerResponse } from 'node:http';
import type * as Http from '../src/http/index.js';
import { type AdapterApp, adapterApp, FRAMEWORKS, type Variant } from './adapter-apps.js';
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
async function rounds(
  ctx: BenchContext,
  sides: readonly Side[],
  calls = ctx.profile.adapterCpu.calls,
): Promise<void> {
  const n = ctx.profile.adapterCpu.rounds;
  for (const s of sides) await cpuPerCall(calls, s.run);
  for (let round = 0; round < n; round++) {
    for (let i = 0; i < sides.length; i++) {
      const s = sides[(i + round) % sides.length] as Side;
      s.samples.push(await cpuPerCall(calls, s.run));
    }
  }
}

const signedUs = (us: number) => `${us >= 0 ? '+' : '−'}${Math.abs(us).toFixed(2)} µs`;

/** `also`: a second side a row is compared with, in its note (median of the paired rounds). */
function rows(caseName: string, base: Side, sides: readonly Side[], also?: Map<Side, Side>): Row[] {
  const baseMedian = median(base.samples);
  return sides.map((s) => {
    const sum = summarize(s.samples);
    const other = also?.get(s);
    const over = other && median(s.samples.map((x, i) => x - (other.samples[i] as number)));
    return {
      bench: 'adapter-cpu',
      case: caseName,
      contestant: s.label,
      value: `${sum.median.toFixed(2)} µs`,
      spread: percentSpread(sum),
      vs: s === base ? 'baseline' : signedUs(sum.median - baseMedian),
      note: `process CPU per request, in process${other ? `; ${signedUs(over as number)} over ${other.label}` : ''}`,
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

const APP_SIDES: readonly (readonly [Variant, string])[] = [
  ['none', 'no limiter'],
  ['map-headers', 'bare Map bucket + the same RateLimit headers'],
  ['consume', 'limiter.consume directly'],
  ['adapter', 'tokenlease rateLimit adapter'],
];

/** A request as a server gets one: fresh each time, as frameworks decorate theirs. */
function appRequest(): IncomingMessage {
  const req = request('GET', '/', { host: 'api', accept: '*/*' }, '127.0.0.1');
  req.httpVersionMajor = 1;
  req.httpVersionMinor = 1;
  req.httpVersion = '1.1';
  return req;
}

/**
 * Calls of an app's listener, each resolving once its 200 is sent (the apps are built to say so).
 * One is in flight at a time, so one `answered` serves every app.
 */
class AppCalls {
  #answered: () => void = () => {};
  readonly answered = () => this.#answered();

  run(app: AdapterApp): Promise<void> {
    return new Promise((resolve) => {
      this.#answered = resolve;
      const req = appRequest();
      app.listener(req, new ServerResponse(req));
    });
  }

  /** One request, checked to be answered 200 (a 500 or a hang would measure an error path). */
  async check(app: AdapterApp, label: string): Promise<void> {
    const req = appRequest();
    const res = new ServerResponse(req);
    const answered = new Promise<void>((resolve) => {
      this.#answered = resolve;
    });
    app.listener(req, res);
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), 2000);
    });
    const how = await Promise.race([answered, timeout]);
    clearTimeout(timer);
    if (how === 'timeout' || res.statusCode !== 200) {
      throw new Error(`adapter-cpu: ${label} answered ${how === 'timeout' ? 'nothing' : res.statusCode}`);
    }
  }
}

async function wholeApps(ctx: BenchContext, framework: (typeof FRAMEWORKS)[number]): Promise<Row[]> {
  const calls = new AppCalls();
  const apps = await Promise.all(
    APP_SIDES.map(([variant]) => adapterApp(framework, variant, { answered: calls.answered })),
  );
  try {
    const sides: Side[] = APP_SIDES.map(([, label], i) => {
      const app = apps[i] as AdapterApp;
      return { label, run: () => calls.run(app), samples: [] };
    });
    for (const [i, s] of sides.entries())
      await calls.check(apps[i] as AdapterApp, `${framework}, ${s.label}`);
    // A whole app costs 5-50 times the limiter alone: a fifth of the calls keeps a round as long.
    await rounds(ctx, sides, Math.ceil(ctx.profile.adapterCpu.calls / 5));
    const [none, withHeaders, , adapter] = sides as [Side, Side, Side, Side];
    return rows(
      `${framework} app, 1 rule, 1 hot client, a fresh request each`,
      none,
      sides,
      new Map([[adapter, withHeaders]]),
    );
  } finally {
    await Promise.all(apps.map((a) => a.close()));
  }
}

export async function runAdapterCpu(ctx: BenchContext): Promise<BenchOutput> {
  ctx.log('adapter-cpu: 1 rule');
  const one = await oneRule(ctx);
  ctx.log('adapter-cpu: 3 rules');
  const three = await threeRules(ctx);
  const apps: Row[] = [];
  for (const framework of FRAMEWORKS) {
    ctx.log(`adapter-cpu: ${framework} app`);
    apps.push(...(await wholeApps(ctx, framework)));
  }
  return { rows: [...one, ...three, ...apps], targets: [] };
}
