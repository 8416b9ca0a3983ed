import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';

// A resolve hook reports every module URL the child loads, so the test sees what an import pulls in.
const HOOKS = `
let port;
export function initialize(data) { port = data.port; }
export async function resolve(specifier, context, next) {
  const result = await next(specifier, context);
  port.postMessage(result.url);
  return result;
}`;

const CHILD = `
import { register } from 'node:module';
import { MessageChannel } from 'node:worker_threads';
const { port1, port2 } = new MessageChannel();
const urls = [];
let sawControl;
const control = new Promise((resolve) => { sawControl = resolve; });
port1.on('message', (url) => { urls.push(url); if (url.includes('/node_modules/express/')) sawControl(); });
register('data:text/javascript,' + encodeURIComponent(${JSON.stringify(HOOKS)}), {
  data: { port: port2 },
  transferList: [port2],
});
const http = await import('tokenlease/http');
const ex = await import('tokenlease/express');
const fa = await import('tokenlease/fastify');
const frameworks = () => urls.filter((u) => /\\/node_modules\\/(express|fastify)\\//.test(u));
const before = frameworks();
await import('express'); // control: the hook does see a framework when one is loaded
await control;
port1.close();
console.log(JSON.stringify({
  before,
  control: frameworks().length > 0,
  exports: [typeof http.rateLimit, typeof http.Plans, typeof ex.rateLimit, typeof fa.default, typeof fa.rateLimitPlugin],
}));
`;

describe('package exports', () => {
  it('tokenlease/http, /express and /fastify resolve from dist and load no framework', () => {
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', CHILD], { encoding: 'utf8' });
    expect(JSON.parse(out)).toEqual({
      before: [],
      control: true,
      exports: ['function', 'function', 'function', 'function', 'function'],
    });
  });

  it("carry the peers' own named exports, so that changing the import is the whole migration", () => {
    const names = `
const ex = await import('tokenlease/express');
const fa = await import('tokenlease/fastify');
console.log(JSON.stringify({
  express: ['default', 'rateLimit', 'MemoryStore', 'ipKeyGenerator'].map((n) => typeof ex[n]),
  constants: [ex.SECOND, ex.MINUTE, ex.HOUR, ex.DAY],
  fastify: [fa.default === fa.fastifyRateLimit, typeof fa.normalizeIP],
}));`;
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', names], { encoding: 'utf8' });
    // express-rate-limit 8.7.5's index exports, and @fastify/rate-limit 11.2's (module.exports.fastifyRateLimit).
    expect(JSON.parse(out)).toEqual({
      express: ['function', 'function', 'function', 'function'],
      constants: [1000, 60_000, 3_600_000, 86_400_000],
      fastify: [true, 'function'],
    });
  });
});
