/**
 * What each algorithm costs Redis, measured on a private redis-server (so INFO commandstats sees
 * only this file's traffic) and printed as the table in docs/algorithms.md:
 *
 *   npx vitest run test/redis/cost.test.ts
 *
 * Memory: `MEMORY USAGE <key> SAMPLES 0` of one key in a typical state. Commands: a workload of
 * 4 limiter instances taking turns, one decision per virtual ms for 4 s, offered at 2x the limit
 * (see WORKLOADS);
 * script calls (EVALSHA round trips) and the Redis commands run inside them, per decision. The
 * scripts run on an explicit clock here; on Redis TIME (the default) each script call adds a TIME.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Limiter, type PolicyConfig, RedisStore } from '../../src/index.js';
import { closeAllClients, trackClient } from '../support/clients.js';
import { type RedisProcess, startRedis } from '../support/redisServer.js';

let server: RedisProcess;
let admin: Redis;
const safe = { enableOfflineQueue: false, autoResendUnfulfilledCommands: false } as const;

beforeAll(async () => {
  server = await startRedis();
  admin = trackClient(new Redis(server.url));
});
afterAll(async () => {
  await closeAllClients();
  await server.stop();
});

/** A fresh limiter instance on its own (already safe, already connected) connection. */
async function instance(policies: Record<string, PolicyConfig>, now: () => number, prefix: string) {
  const client = trackClient(new Redis(server.url, safe));
  const store = new RedisStore({ client, now, prefix, timeoutMs: 2000 });
  await store.ready();
  return { limiter: new Limiter({ store, policies, now, sweepIntervalMs: 0 }), store };
}

async function commandStats(): Promise<Map<string, number>> {
  const info = await admin.info('commandstats');
  const calls = new Map<string, number>();
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) calls.set(m[1]!, Number(m[2]));
  return calls;
}

const ADMIN = /^(info|config|ping|client|hello|memory|script|select|quit|command)/;

interface Workload {
  name: string;
  policy: PolicyConfig;
  decide: (l: Limiter) => Promise<unknown>;
}

const consume = (l: Limiter) => l.consume('p', 'k');
const slot = async (l: Limiter) => {
  const h = await l.acquire('p', 'k');
  await h.release();
};

// Offered: 1000 decisions/s for 4 s. Limits: 500/s, or 2000 per 10 s window (used up after 2 s).
const WORKLOADS: Workload[] = [
  { name: 'token-bucket', policy: { algorithm: 'token-bucket', rate: 500, burst: 500 }, decide: consume },
  {
    name: 'fixed-window',
    policy: { algorithm: 'fixed-window', limit: 2000, window: '10s' },
    decide: consume,
  },
  {
    name: 'sliding-window',
    policy: { algorithm: 'sliding-window', limit: 2000, window: '10s' },
    decide: consume,
  },
  { name: 'sliding-log', policy: { algorithm: 'sliding-log', limit: 500, window: '1s' }, decide: consume },
  {
    name: 'sliding-log (quantum 100ms)',
    policy: { algorithm: 'sliding-log', limit: 500, window: '1s', quantum: '100ms' },
    decide: consume,
  },
  { name: 'leaky-bucket', policy: { algorithm: 'leaky-bucket', rate: 500, burst: 50 }, decide: consume },
  { name: 'concurrency (acquire + release)', policy: { algorithm: 'concurrency', limit: 50 }, decide: slot },
];

const DECISIONS = 4000;

async function measure(policy: PolicyConfig, decide: Workload['decide']) {
  let t = Date.UTC(2024, 4, 10, 12);
  const now = () => t;
  const prefix = `cost:${Math.random().toString(36).slice(2)}:`;
  const instances = await Promise.all(Array.from({ length: 4 }, () => instance({ p: policy }, now, prefix)));
  await admin.config('RESETSTAT');
  for (let i = 0; i < DECISIONS; i++) {
    t += 1;
    await decide(instances[i % 4]!.limiter);
  }
  for (const { limiter } of instances) await limiter.close();
  const stats = await commandStats();
  let scripts = 0;
  let inside = 0;
  for (const [name, calls] of stats) {
    if (name === 'evalsha' || name === 'eval') scripts += calls;
    else if (!ADMIN.test(name)) inside += calls;
  }
  for (const { store } of instances) await store.close();
  return { scripts: scripts / DECISIONS, commands: inside / DECISIONS };
}

/** Memory of one key in a typical state, built by real decisions. */
async function memory(policy: PolicyConfig, decisions: number, spacingMs: number, decide = consume) {
  let t = Date.UTC(2024, 4, 10, 12);
  const now = () => t;
  const prefix = `mem:${Math.random().toString(36).slice(2)}:`;
  const { limiter, store } = await instance(
    { p: { ...policy, lease: 'exact' } as PolicyConfig },
    now,
    prefix,
  );
  const held = [];
  for (let i = 0; i < decisions; i++) {
    t += spacingMs;
    held.push(await decide(limiter));
  }
  const [key] = await admin.keys(`${prefix}*`);
  const bytes = Number(await admin.call('MEMORY', 'USAGE', key!, 'SAMPLES', '0'));
  await limiter.close();
  await store.close();
  return bytes;
}

const hold = (l: Limiter) => l.acquire('p', 'k');

describe('Redis cost per algorithm (printed for docs/algorithms.md)', () => {
  it('measures memory per key with MEMORY USAGE', async () => {
    const rows: [string, number][] = [
      ['token-bucket', await memory({ algorithm: 'token-bucket', rate: 100 }, 1, 1)],
      ['fixed-window', await memory({ algorithm: 'fixed-window', limit: 1_000_000, window: '1d' }, 1, 1)],
      ['sliding-window', await memory({ algorithm: 'sliding-window', limit: 100, window: '1m' }, 1, 1)],
      [
        'sliding-log, 100 entries',
        await memory({ algorithm: 'sliding-log', limit: 100, window: '1m' }, 100, 100),
      ],
      [
        'sliding-log, 1000 entries',
        await memory({ algorithm: 'sliding-log', limit: 1000, window: '1m' }, 1000, 10),
      ],
      [
        'sliding-log quantum 1s, 1m window full (60 buckets)',
        await memory({ algorithm: 'sliding-log', limit: 1000, window: '1m', quantum: '1s' }, 1000, 59),
      ],
      ['leaky-bucket', await memory({ algorithm: 'leaky-bucket', rate: 100 }, 1, 1)],
      ['concurrency, 10 slots held', await memory({ algorithm: 'concurrency', limit: 10 }, 10, 1, hold)],
      ['concurrency, 100 slots held', await memory({ algorithm: 'concurrency', limit: 100 }, 100, 1, hold)],
    ];
    console.log(`\nMEMORY USAGE per key (bytes)\n${rows.map(([n, b]) => `| ${n} | ${b} |`).join('\n')}`);
    const bytes = new Map(rows);
    expect(bytes.get('fixed-window')).toBeLessThan(200);
    expect(bytes.get('sliding-log, 1000 entries')!, 'the log grows with its entries').toBeGreaterThan(
      5 * bytes.get('sliding-log, 100 entries')!,
    );
    expect(bytes.get('sliding-log quantum 1s, 1m window full (60 buckets)')!).toBeLessThan(
      bytes.get('sliding-log, 1000 entries')! / 10,
    );
  });

  it('measures Redis calls per decision, leased and exact', async () => {
    const lines = ['| algorithm | leased: scripts / commands | exact: scripts / commands |'];
    const leasedBy = new Map<string, number>();
    for (const w of WORKLOADS) {
      const leasable = !['sliding-log', 'leaky-bucket'].includes(w.policy.algorithm);
      const leased = leasable ? await measure(w.policy, w.decide) : undefined;
      const exact = await measure({ ...w.policy, lease: 'exact' } as PolicyConfig, w.decide);
      if (leased) leasedBy.set(w.name, leased.scripts);
      const fmt = (m?: { scripts: number; commands: number }) =>
        m ? `${m.scripts.toFixed(3)} / ${m.commands.toFixed(2)}` : '—';
      lines.push(`| ${w.name} | ${fmt(leased)} | ${fmt(exact)} |`);
    }
    console.log(
      `\nRedis calls per decision at 2x the limit (${DECISIONS} decisions, 4 instances)\n${lines.join('\n')}`,
    );
    for (const name of ['token-bucket', 'fixed-window', 'sliding-window']) {
      expect(leasedBy.get(name), name).toBeLessThanOrEqual(0.1);
    }
  });

  it('reads Redis TIME once per batch, not once per operation in it', async () => {
    const client = trackClient(new Redis(server.url, safe));
    // The store's own clock (no explicit `now`): the scripts read TIME.
    const store = new RedisStore({ client, prefix: 'time-once', timeoutMs: 2000 });
    await store.ready();
    const limiter = new Limiter({
      store,
      policies: { p: { algorithm: 'token-bucket', rate: 100, burst: 100, lease: 'exact' } },
      sweepIntervalMs: 0,
    });
    await limiter.consume('p', 'warm');
    const before = await commandStats();
    const trips = store.roundTrips;
    await Promise.all(Array.from({ length: 50 }, (_, i) => limiter.consume('p', `k${i}`)));
    const after = await commandStats();
    const delta = (name: string) => (after.get(name) ?? 0) - (before.get(name) ?? 0);
    expect(store.roundTrips - trips, 'the 50 calls of one turn travel in one batch').toBe(1);
    expect(delta('time'), 'one TIME for the whole batch').toBe(1);
    expect(delta('set'), 'every operation still ran').toBe(50);
    await limiter.close();
    await store.close();
  });
});
