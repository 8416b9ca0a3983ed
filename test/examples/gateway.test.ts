/**
 * The example gateway (examples/gateway/server.ts) as a real process: what an operator sees when
 * its port is taken, that its own endpoints are never proxied or limited, and that SIGTERM closes
 * everything it opened so the process exits by itself.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import http from 'node:http';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { uniquePrefix } from '../support/clients.js';
import { freePort } from '../support/redisServer.js';

const GATEWAY = fileURLToPath(new URL('../../examples/gateway/server.ts', import.meta.url));
const TSX = fileURLToPath(new URL('../../node_modules/tsx/dist/esm/index.mjs', import.meta.url));

const servers: http.Server[] = [];
afterAll(() => Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve)))));

/** An upstream that counts what reaches it. */
async function upstream(): Promise<{ url: string; hits: () => number }> {
  let hits = 0;
  const server = http.createServer((_req, res) => {
    hits++;
    res.end('upstream');
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address() as { port: number };
  return { url: `http://127.0.0.1:${address.port}`, hits: () => hits };
}

/** A port some other process already listens on. */
async function takenPort(): Promise<number> {
  const server = http.createServer();
  servers.push(server);
  const port = await freePort();
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return port;
}

interface Gateway {
  child: ChildProcess;
  exit: Promise<[number | null, NodeJS.Signals | null]>;
  output: () => { stdout: string; stderr: string };
}

function start(env: Record<string, string>): Gateway {
  const child = spawn(process.execPath, ['--import', TSX, GATEWAY], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk));
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk));
  const exit = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
  return { child, exit, output: () => ({ stdout, stderr }) };
}

async function listening(gateway: Gateway): Promise<void> {
  for (let i = 0; i < 200 && !gateway.output().stdout.includes('gateway on http://'); i++) {
    if (gateway.child.exitCode !== null) break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  expect(gateway.output().stdout, `the gateway started (stderr: ${gateway.output().stderr})`).toMatch(
    /gateway on http:\/\//,
  );
}

describe('the example gateway', () => {
  it.each([
    ['its own port', (port: number) => ({ PORT: String(port), UPSTREAM: 'http://127.0.0.1:9' }), 'port'],
    [
      'the demo upstream port (PORT + 1)',
      (port: number) => ({ PORT: String(port - 1) }),
      'demo upstream (PORT + 1) port',
    ],
  ])(
    'says which port is taken when %s is in use, and exits 1 without a stack trace',
    async (_what, env, who) => {
      const port = await takenPort();
      const gateway = start(env(port));
      const [code] = await gateway.exit;
      const { stderr } = gateway.output();
      expect(code, `exit status (stderr: ${stderr})`).toBe(1);
      expect(stderr.trim(), 'one line saying which port and what to change').toBe(
        `gateway: ${who} ${port} on 127.0.0.1 is already in use; set PORT to a free port`,
      );
      expect(stderr, 'no stack trace').not.toMatch(/^\s+at /m);
    },
  );

  it('answers GET and HEAD of /metrics and /healthz itself: never proxied, never limited', async () => {
    const up = await upstream();
    const port = await freePort();
    const gateway = start({ PORT: String(port), UPSTREAM: up.url });
    await listening(gateway);
    const base = `http://127.0.0.1:${port}`;
    // Ten probes from one anonymous client, whose plan has a burst of 5.
    for (let i = 0; i < 10; i++) {
      const head = await fetch(`${base}/metrics`, { method: 'HEAD' });
      expect(head.status, `HEAD /metrics #${i + 1}`).toBe(200);
      expect(head.headers.get('content-type'), 'Prometheus text').toMatch(/^text\/plain/);
      expect(head.headers.has('ratelimit-policy'), 'not rate limited').toBe(false);
      expect(await head.text(), 'no body for HEAD').toBe('');
    }
    expect((await fetch(`${base}/healthz`, { method: 'HEAD' })).status, 'HEAD /healthz').toBe(200);
    const post = await fetch(`${base}/metrics`, { method: 'POST' });
    expect([post.status, post.headers.get('allow')], 'POST /metrics').toEqual([405, 'GET, HEAD']);
    const stats = (await (await fetch(`${base}/healthz`)).json()) as { decisions: number };
    expect(stats.decisions, 'no limit decision was made').toBe(0);
    expect(up.hits(), 'nothing reached the upstream').toBe(0);

    expect((await fetch(`${base}/profile`)).status, 'an ordinary request is proxied').toBe(200);
    expect(up.hits(), 'it reached the upstream').toBe(1);
    gateway.child.kill('SIGTERM');
    expect((await gateway.exit)[0], 'clean exit').toBe(0);
  });

  it('on SIGTERM with Redis closes the limiter, the store and the client, and exits by itself', async () => {
    const up = await upstream();
    const port = await freePort();
    const gateway = start({
      PORT: String(port),
      UPSTREAM: up.url,
      REDIS_URL: inject('redisUrl'),
      KEY_PREFIX: uniquePrefix('gateway'),
    });
    await listening(gateway);
    for (let i = 0; i < 3; i++) {
      const res = await fetch(`http://127.0.0.1:${port}/profile`, { headers: { 'x-api-key': 'k_pro_demo' } });
      expect(res.status, `request ${i + 1} through Redis`).toBe(200);
    }
    gateway.child.kill('SIGTERM');
    // The handler never calls process.exit: a connection left open would keep the process alive.
    const timeout = new Promise<'still running'>((resolve) =>
      setTimeout(() => resolve('still running'), 10_000),
    );
    const outcome = await Promise.race([gateway.exit.then(([code]) => code), timeout]);
    if (outcome === 'still running') gateway.child.kill('SIGKILL');
    expect(outcome, `exit after SIGTERM (stderr: ${gateway.output().stderr})`).toBe(0);
  });
});
