// Cost of the HTTP layer per request: RateLimitCore.check (key resolution, route costs, three rules,
// headers) next to limiter.consume of the same checks alone, on a MemoryStore. In-process, no sockets.
//   npx tsx bench/httpCore.ts
import type { IncomingMessage } from 'node:http';
import { RateLimitCore } from '../src/http/core.js';
import { nodeView } from '../src/http/node.js';
import { type Check, Limiter, MemoryStore, type PolicyConfig } from '../src/index.js';

// Limits high enough that nothing is refused: this measures the path every admitted request takes.
const policies: Record<string, PolicyConfig> = {
  'per-key': { algorithm: 'token-bucket', rate: 1e9, period: '1s' },
  daily: { algorithm: 'token-bucket', rate: 1e12, period: '1d' },
  reports: { algorithm: 'token-bucket', rate: 1e9, period: '1m' },
};
const limiter = new Limiter({ store: new MemoryStore(), policies });
const bare = new Limiter({ store: new MemoryStore(), policies });
const core = new RateLimitCore<IncomingMessage>(
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
  nodeView,
);
// 100 API keys, IPv6 clients behind a local proxy, one request in ten a report.
const requests = Array.from({ length: 1000 }, (_, i) => ({
  method: i % 10 === 0 ? 'POST' : 'GET',
  url: i % 10 === 0 ? '/reports' : '/profile?x=1',
  headers: { 'x-api-key': `k_${i % 100}`, 'x-forwarded-for': `2001:db8:${i % 7}::1` },
  socket: { remoteAddress: '127.0.0.1' },
})) as unknown as IncomingMessage[];
const checks: Check[][] = requests.map((r) => {
  const key = `apiKey=${r.headers['x-api-key']}`;
  const report = r.method === 'POST';
  return [
    { policy: 'per-key', key, cost: report ? 20 : 1 },
    { policy: 'daily', key },
    ...(report ? [{ policy: 'reports', key: `${key}&route=POST /reports`, cost: 20 }] : []),
  ];
});

const N = 100_000;
async function perRequestMicros(run: (i: number) => Promise<unknown>): Promise<number> {
  const start = process.hrtime.bigint();
  for (let i = 0; i < N; i++) await run(i % 1000);
  return Number(process.hrtime.bigint() - start) / N / 1000;
}
const samples = { core: [] as number[], consume: [] as number[] };
for (let round = 0; round < 7; round++) {
  samples.core.push(await perRequestMicros((i) => core.check(requests[i]!)));
  samples.consume.push(await perRequestMicros((i) => bare.consume(checks[i]!)));
}
const median = (xs: number[]) => xs.slice().sort((a, b) => a - b)[xs.length >> 1]!;
const show = (xs: number[]) =>
  `median ${median(xs).toFixed(1)} µs (rounds: ${xs.map((x) => x.toFixed(1)).join(' ')})`;
console.log(`RateLimitCore.check, 2-3 rules: ${show(samples.core)}`);
console.log(`limiter.consume alone:          ${show(samples.consume)}`);
console.log(
  `HTTP layer on top of the limiter: ${(median(samples.core) - median(samples.consume)).toFixed(1)} µs per request`,
);
await Promise.all([limiter.close(), bare.close()]);
