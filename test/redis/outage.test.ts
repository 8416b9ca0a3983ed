import { performance } from 'node:perf_hooks';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Decision, Limiter, RedisStore } from '../../src/index.js';
import { closeAllClients, trackClient } from '../support/clients.js';
import { FaultyStore } from '../support/faultyStore.js';
import { type RedisProcess, startRedis } from '../support/redisServer.js';

const delay = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

const TIMEOUT_MS = 50;
const COOL_DOWN_MS = 250;
const INSTANCES = 4;
const EXPECTED_INSTANCES = 2;
const RATE = 200;
const policies = { p: { algorithm: 'token-bucket' as const, rate: RATE, burst: RATE } }; // fail: 'local'

interface Sample {
  instance: number;
  key: string;
  start: number;
  /** Limiter clock (Date.now) when the decision came back. */
  decidedAt: number;
  latencyMs: number;
  decision?: Decision;
  error?: unknown;
}

let server: RedisProcess;
beforeAll(async () => {
  server = await startRedis();
});
afterAll(async () => {
  await closeAllClients();
  await server.stop();
});

/** An application's client: it sees the outages too, and reports them through 'error' events. */
function userClient(): Redis {
  const client = trackClient(new Redis(server.url));
  client.on('error', () => {});
  return client;
}

function p99(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))] ?? 0;
}

describe('Redis outage under load', () => {
  it('stalls and crashes of Redis: no errors, fail policy within budget, bounded latency, leasing resumes', async () => {
    const instances = await Promise.all(
      Array.from({ length: INSTANCES }, async () => {
        const redis = new RedisStore({ client: userClient(), timeoutMs: TIMEOUT_MS });
        await redis.ready();
        // A pass-through that counts the calls that really reach the RedisStore.
        const counted = new FaultyStore(redis);
        const limiter = new Limiter({
          store: counted,
          policies,
          expectedInstances: EXPECTED_INSTANCES,
          breaker: { coolDown: COOL_DOWN_MS },
        });
        return { redis, counted, limiter };
      }),
    );

    const samples: Sample[] = [];
    let running = true;
    const timed = async (instance: number, key: string) => {
      const start = performance.now();
      const sample: Sample = { instance, key, start, decidedAt: 0, latencyMs: 0 };
      try {
        sample.decision = await instances[instance]!.limiter.consume('p', key);
      } catch (error) {
        sample.error = error;
      }
      sample.latencyMs = performance.now() - start;
      sample.decidedAt = Date.now();
      samples.push(sample);
    };
    const load = async (i: number) => {
      while (running) {
        await Promise.all([
          timed(i, 'hot'),
          timed(i, 'hot'),
          timed(i, 'hot'),
          timed(i, `cold-${Math.floor(Math.random() * 8)}`),
        ]);
        await delay(4);
      }
    };
    const callsNow = () => instances.reduce((sum, x) => sum + x.counted.calls, 0);

    const phases: Record<string, { start: number; opened: number; end: number; calls: [number, number] }> =
      {};
    const allOpen = () => instances.every((x) => x.limiter.stats().breaker !== 'closed');
    const phase = async (name: string, ms: number, fault: () => unknown) => {
      await fault();
      const start = performance.now();
      await delay(100); // the breaker opens within the first failures
      // On a loaded machine the first failures can take longer (a timed-out call, 50 ms, comes back
      // late): probes are counted from when every breaker has opened, and a stall or crash must open them.
      while (name !== 'resumed' && !allOpen() && performance.now() - start < ms / 2) await delay(5);
      if (name !== 'resumed') expect(allOpen(), `${name}: every breaker opened`).toBe(true);
      const opened = performance.now();
      const calls0 = callsNow();
      await delay(Math.max(0, ms - (opened - start)));
      phases[name] = { start, opened, end: performance.now(), calls: [calls0, callsNow()] };
    };

    const loops = instances.map((_, i) => load(i));
    await delay(500);
    await phase('stalled', 1000, () => process.kill(server.pid, 'SIGSTOP'));
    await phase('resumed', 500, () => process.kill(server.pid, 'SIGCONT'));
    await phase('crashed', 1000, () => server.kill());
    await server.restart();
    const back = performance.now();
    await delay(1000);
    running = false;
    await Promise.all(loops);

    expect(samples.filter((s) => s.error !== undefined).map((s) => String(s.error))).toEqual([]);

    const report: string[] = [];
    for (const name of ['stalled', 'crashed']) {
      const { start, opened, end, calls } = phases[name]!;
      const during = samples.filter((s) => s.start >= start && s.start < end);
      const late = during.filter((s) => s.start >= start + 100);
      expect(
        late.filter((s) => s.decision?.source === 'store').length,
        `${name}: nothing is decided by the store once it failed`,
      ).toBe(0);
      expect(during.some((s) => s.decision?.source === 'fallback')).toBe(true);

      // After the first failures the breaker lets one probe per cool-down through, per instance.
      const probes = calls[1] - calls[0];
      expect(probes, `${name}: store calls after the breaker opened`).toBeLessThanOrEqual(
        INSTANCES * (Math.ceil((end - opened) / COOL_DOWN_MS) + 1),
      );

      // The local fallback's budget per instance: its share (1/expectedInstances here: each of the
      // 4 instances leased about 1/4 of the key) of a burst, plus its share of the refill.
      let admittedTotal = 0;
      let budgetTotal = 0;
      for (let i = 0; i < INSTANCES; i++) {
        const admitted = during.filter(
          (s) =>
            s.instance === i && s.key === 'hot' && s.decision?.source === 'fallback' && s.decision.allowed,
        );
        if (admitted.length === 0) continue;
        const span = (admitted.at(-1)!.decidedAt - admitted[0]!.decidedAt + 1) / 1000;
        const share = 1 / EXPECTED_INSTANCES;
        const budget = share * RATE + share * RATE * span;
        expect(admitted.length, `${name}: instance ${i} fallback admissions`).toBeLessThanOrEqual(budget + 1);
        admittedTotal += admitted.length;
        budgetTotal += budget;
      }
      expect(admittedTotal, `${name}: the fallback was used`).toBeGreaterThan(0);

      const latencies = during.map((s) => s.latencyMs);
      const slow = latencies.filter((ms) => ms >= TIMEOUT_MS / 2).length;
      report.push(
        `${name}: ${during.length} decisions, p99 ${p99(latencies).toFixed(2)} ms, max ${Math.max(...latencies).toFixed(1)} ms, ` +
          `${slow} waited >= ${TIMEOUT_MS / 2} ms, ${probes} store calls after the first 100 ms, ` +
          `hot key: fallback admitted ${admittedTotal} of a budget of ${budgetTotal.toFixed(0)}`,
      );
      // Nothing waits longer than one store call, and that is bounded by the timeout; the factor 2
      // only absorbs scheduling noise on a loaded machine.
      expect(p99(latencies), `${name}: p99 of consume`).toBeLessThanOrEqual(2 * TIMEOUT_MS);
    }

    // Leasing resumes by itself: reconnect (<= 500 ms) plus the breaker's cool-down (250 ms).
    const resumedAt = instances.map((_, i) => {
      const first = samples.find(
        (s) => s.instance === i && s.start >= back && s.decision?.source === 'store',
      );
      return first ? first.start - back : Number.POSITIVE_INFINITY;
    });
    report.push(`leasing resumed ${resumedAt.map((ms) => ms.toFixed(0)).join(', ')} ms after Redis was back`);
    console.log(report.join('\n'));
    for (const ms of resumedAt) expect(ms, 'leasing resumed within a second (plus slack)').toBeLessThan(1500);

    await Promise.all(instances.map((x) => x.limiter.close()));
    await Promise.all(instances.map((x) => x.redis.close()));
    const admin = userClient();
    const keys = await admin.keys('*');
    const ttls = await Promise.all(keys.map((k) => admin.pttl(k)));
    // -2: the key expired between KEYS and PTTL; -1 would be a key without a TTL.
    expect(
      ttls.filter((t) => t === -1),
      'every key has a TTL',
    ).toEqual([]);
  });

  it('starts degraded with Redis down: no throw, no unhandled rejection, leasing once Redis is up', async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      await server.kill();
      const warnings: string[] = [];
      const redis = new RedisStore({
        client: userClient(),
        timeoutMs: TIMEOUT_MS,
        onWarning: (m) => warnings.push(m),
      });
      const limiter = new Limiter({ store: redis, policies, expectedInstances: 1 });
      const down = await Promise.all(Array.from({ length: 50 }, () => limiter.consume('p', 'k')));
      expect(down.every((d) => d.allowed && d.source === 'fallback')).toBe(true);
      await server.restart();
      let resumed: Decision | undefined;
      for (let i = 0; i < 200 && (!resumed || resumed.source === 'fallback'); i++) {
        resumed = await limiter.consume('p', 'k');
        await delay(10);
      }
      expect(resumed?.source, 'leasing resumed by itself').not.toBe('fallback');
      expect(limiter.stats().breaker).toBe('closed');
      await limiter.close();
      await redis.close();
      expect(warnings, 'noeviction is the default policy: nothing to warn about').toEqual([]);
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });

  it('warns once at start when maxmemory-policy lets Redis evict limiter keys', async () => {
    const admin = userClient();
    await admin.config('SET', 'maxmemory-policy', 'allkeys-lru');
    try {
      const warnings: string[] = [];
      const redis = new RedisStore({
        client: userClient(),
        onWarning: (m) => warnings.push(m),
      });
      await redis.ready();
      const limiter = new Limiter({ store: redis, policies });
      for (let i = 0; i < 20; i++) await limiter.consume('p', 'k');
      // The check runs in the background once the connection is ready.
      for (let i = 0; i < 100 && warnings.length === 0; i++) await delay(10);
      await limiter.close();
      await redis.close();
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatch(/maxmemory-policy is allkeys-lru/);
    } finally {
      await admin.config('SET', 'maxmemory-policy', 'noeviction');
    }
  });

  it('SCRIPT FLUSH mid-traffic: zero errors and no fallback decisions', async () => {
    const admin = userClient();
    const instances = Array.from({ length: INSTANCES }, () => {
      const redis = new RedisStore({ client: userClient(), timeoutMs: 1000 });
      // Exact mode so every decision runs a script.
      const exact = { p: { ...policies.p, lease: 'exact' as const }, l: policies.p };
      return { redis, limiter: new Limiter({ store: redis, policies: exact }) };
    });
    await Promise.all(instances.map((x) => x.redis.ready()));
    const decisions: Decision[] = [];
    for (let round = 0; round < 20; round++) {
      if (round % 4 === 1) await admin.script('FLUSH');
      const batch = instances.flatMap(({ limiter }) => [
        limiter.consume('p', `k${round % 3}`),
        limiter.consume('l', 'hot'),
        limiter.consume([
          { policy: 'p', key: 'multi' },
          { policy: 'l', key: 'multi' },
        ]),
      ]);
      decisions.push(...(await Promise.all(batch)));
    }
    expect(decisions).toHaveLength(20 * INSTANCES * 3);
    expect(decisions.filter((d) => d.source === 'fallback')).toEqual([]);
    await Promise.all(instances.map((x) => x.limiter.close()));
    await Promise.all(instances.map((x) => x.redis.close()));
  });
});
