import { describe, expect, it } from 'vitest';
import {
  ConfigError,
  type Decision,
  Limiter,
  type LimiterOptions,
  MemoryStore,
  type TokenBucketPolicy,
} from '../src/index.js';
import { storageKey } from '../src/stores/keys.js';
import { tokenBucketAcquire } from '../src/stores/tokenBucketOps.js';
import { closedAfterEach } from './support/closedAfterEach.js';
import { FaultyStore } from './support/faultyStore.js';

const DAY = '1d' as const;

function clock(start = 1_000_000) {
  let t = start;
  return { now: () => t, advance: (ms: number) => (t += ms) };
}

const open = closedAfterEach();

function setup(policies: Record<string, TokenBucketPolicy>, options: Partial<LimiterOptions> = {}) {
  const c = clock();
  const store = new FaultyStore(new MemoryStore({ now: c.now }));
  const limiter = new Limiter({ store, policies, now: c.now, sweepIntervalMs: 0, ...options });
  open.push(limiter);
  /** The shared bucket's level, read without changing it. */
  const level = async (policy: string, key: string) => {
    const p = policies[policy]!;
    const shape = { rate: p.rate, periodMs: p.period === DAY ? 86_400_000 : 1000, burst: p.burst ?? p.rate };
    const probe = { ...shape, want: 1e9, min: 1e9, ahead: 0 };
    const r = await store.inner.run(tokenBucketAcquire, storageKey('token-bucket', policy, key), probe);
    return r.levelBefore;
  };
  return { c, store, limiter, level };
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

async function drive(l: Limiter, c: { advance: (ms: number) => void }, ms: number, step = 10, perStep = 5) {
  const decisions: Decision[] = [];
  for (let t = 0; t < ms; t += step) {
    for (let i = 0; i < perStep; i++) decisions.push(await l.consume('p', 'k'));
    c.advance(step);
  }
  return decisions;
}

describe("fail policy 'local' (the default)", () => {
  it('starts degraded and admits 1/expectedInstances of the limit, never more than its budget', async () => {
    const { c, store, limiter } = setup(
      { p: { algorithm: 'token-bucket', rate: 100, burst: 100 } },
      { expectedInstances: 4 },
    );
    store.fault = 'down';
    const decisions = await drive(limiter, c, 2000);
    const admitted = decisions.filter((d) => d.allowed).length;
    // Budget of one instance over an outage of T ms: burst/4 + rate/4 * T.
    const budget = 100 / 4 + (100 / 4) * 2;
    expect(admitted).toBeLessThanOrEqual(budget);
    expect(admitted, 'the local bucket admits its whole budget').toBeGreaterThanOrEqual(budget - 1);
    expect(new Set(decisions.map((d) => d.source))).toEqual(new Set(['fallback']));
    for (const d of decisions.filter((x) => !x.allowed)) {
      expect(d.retryAfterMs).toBeGreaterThan(0);
      expect(d.retryAfterMs, 'one local token refills in 40 ms').toBeLessThanOrEqual(40);
    }
    expect(limiter.stats()).toMatchObject({ fallbackDecisions: decisions.length, breaker: 'open' });
  });

  it('stops calling a failing store after 3 failures, probing once per cool-down', async () => {
    const { c, store, limiter } = setup({ p: { algorithm: 'token-bucket', rate: 100 } });
    store.fault = 'down';
    await drive(limiter, c, 2000);
    // 1000 decisions over 2 s: 3 failures open the breaker, then one probe per 250 ms cool-down.
    expect(store.calls).toBeGreaterThanOrEqual(3);
    expect(store.calls).toBeLessThanOrEqual(3 + 2000 / 250);
    const { storeCalls, storeCallsSuspended } = limiter.stats();
    expect(storeCalls - storeCallsSuspended, 'the calls that reached the store').toBe(store.calls);
  });

  it('serves leases already held before falling back', async () => {
    const { c, store, limiter } = setup({ p: { algorithm: 'token-bucket', rate: 1000, burst: 1000 } });
    await drive(limiter, c, 200);
    const { tokensLeased } = limiter.stats();
    const spent = 20 * 5;
    expect(tokensLeased, 'holds unused leased tokens').toBeGreaterThan(spent);
    store.fault = 'down';
    const during: Decision[] = [];
    for (let i = 0; i < tokensLeased; i++) during.push(await limiter.consume('p', 'k'));
    const fromLease = during.filter((d) => d.source === 'lease');
    expect(fromLease.length, 'every held token is spent first').toBe(tokensLeased - spent);
    expect(fromLease.every((d) => d.allowed)).toBe(true);
    expect(during.slice(fromLease.length).every((d) => d.source === 'fallback')).toBe(true);
  });

  it("uses the instance's last known share of the key when it is larger than 1/expectedInstances", async () => {
    const { c, store, limiter } = setup(
      { p: { algorithm: 'token-bucket', rate: 100, burst: 100 } },
      { expectedInstances: 20 },
    );
    // Sticky balancing: this instance alone served the key, at its full limit, for 5 s.
    await drive(limiter, c, 5000, 10, 1);
    store.fault = 'down';
    const admitted = (await drive(limiter, c, 1000)).filter((d) => d.allowed && d.source === 'fallback');
    // 1/20 of the limit would be 5 + 5/s; the share it actually had is most of the limit.
    expect(admitted.length).toBeGreaterThan(100);
    expect(admitted.length, 'never more than the whole limit').toBeLessThanOrEqual(100 + 100);
  });
});

describe('a store with shards (Redis Cluster nodes)', () => {
  it('suspends only the shard that fails; keys on the others keep leasing', async () => {
    const { c, store, limiter } = setup({ p: { algorithm: 'token-bucket', rate: 100 } });
    store.shard = (key) => (key.startsWith('{k:down') ? 'node-1' : 'node-2');
    store.faultyShard = 'node-1';
    store.fault = 'down';
    const decisions: Decision[] = [];
    for (let t = 0; t < 1000; t += 10) {
      decisions.push(await limiter.consume('p', 'down'), await limiter.consume('p', 'up'));
      c.advance(10);
    }
    const sources = (key: string) => new Set(decisions.filter((d) => d.key === key).map((d) => d.source));
    expect(sources('down')).toEqual(new Set(['fallback']));
    expect(sources('up')).not.toContain('fallback');
    expect(limiter.stats().breaker, 'the worst shard').toBe('open');
  });
});

describe('breaker state without traffic (issue 13 item 7)', () => {
  /** A limiter on the real clock: the breaker's background round runs on timers. */
  function live(store: FaultyStore) {
    const limiter = new Limiter({
      store,
      policies: { p: { algorithm: 'token-bucket', rate: 100 } },
      breaker: { coolDown: '50ms' },
      sweepIntervalMs: 0,
    });
    open.push(limiter);
    return limiter;
  }
  const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
  async function until(check: () => boolean, ms: number): Promise<number> {
    const start = Date.now();
    while (!check() && Date.now() - start < ms) await delay(10);
    return Date.now() - start;
  }

  it('probes an open shard after its cool-down with no request for it, and closes once it answers', async () => {
    const store = new FaultyStore(new MemoryStore());
    const limiter = live(store);
    store.fault = 'down';
    for (let i = 0; i < 3; i++) await limiter.consume('p', 'a');
    expect(limiter.stats().breaker).toBe('open');
    await delay(200);
    expect(limiter.stats().breaker, 'still down: probes fail and it stays open').toBe('open');
    const probes = store.calls;
    expect(probes, 'probes were sent while idle').toBeGreaterThan(3);
    store.fault = 'none';
    const ms = await until(() => limiter.stats().breaker === 'closed', 2000);
    console.log(`idle breaker (cool-down 50 ms): closed ${ms} ms after the store came back, no traffic`);
    expect(limiter.stats().breaker, `closed ${ms} ms after the store came back, without traffic`).toBe(
      'closed',
    );
    await limiter.close();
    const after = store.calls;
    store.fault = 'down';
    await delay(150);
    expect(store.calls, 'no probes after close()').toBe(after);
  });

  it('forgets the breaker of a shard no key maps to any more (a failed-over Cluster master)', async () => {
    const store = new FaultyStore(new MemoryStore());
    let master = 'node-1';
    store.shard = () => master;
    store.faultyShard = 'node-1';
    store.fault = 'down'; // node-1 never comes back
    const limiter = live(store);
    for (let i = 0; i < 3; i++) await limiter.consume('p', 'a');
    expect(limiter.stats().breaker).toBe('open');
    master = 'node-4'; // its replica is promoted: the slot now lives there
    const ms = await until(() => limiter.stats().breaker === 'closed', 1000);
    expect(limiter.stats().breaker, `closed after ${ms} ms`).toBe('closed');
    expect((await limiter.consume('p', 'a')).source, 'served by the new master').not.toBe('fallback');
  });
});

describe('fail policies of the other algorithms', () => {
  it.each([
    ['fixed-window', { algorithm: 'fixed-window', limit: 100, window: '1h' }],
    ['sliding-window', { algorithm: 'sliding-window', limit: 100, window: '1h' }],
    ['sliding-log', { algorithm: 'sliding-log', limit: 100, window: '1h' }],
    ['leaky-bucket', { algorithm: 'leaky-bucket', rate: 100, period: '1h', burst: 100 }],
  ] as const)('%s: the local share of its limit while the store is down', async (_name, policy) => {
    let t = 1_000_000;
    const store = new FaultyStore(new MemoryStore({ now: () => t }));
    const limiter = new Limiter({
      store,
      policies: { p: policy },
      now: () => t,
      expectedInstances: 4,
      sweepIntervalMs: 0,
    });
    open.push(limiter);
    store.fault = 'down';
    const decisions: Decision[] = [];
    for (let i = 0; i < 60; i++) {
      decisions.push(await limiter.consume('p', 'k'));
      t += 10;
    }
    expect(decisions.every((d) => d.source === 'fallback')).toBe(true);
    // A quarter of 100 at once; the refill of 100 an hour adds nothing in 600 ms.
    expect(decisions.filter((d) => d.allowed)).toHaveLength(25);
  });
});

describe("fail policies 'open' and 'closed'", () => {
  it("'open' allows everything and says so", async () => {
    const { c, store, limiter } = setup({ p: { algorithm: 'token-bucket', rate: 10, fail: 'open' } });
    store.fault = 'down';
    const decisions = await drive(limiter, c, 500);
    expect(decisions.every((d) => d.allowed && d.source === 'fallback')).toBe(true);
  });

  it("'closed' denies with retryAfterMs until the next probe", async () => {
    const { c, store, limiter } = setup(
      { p: { algorithm: 'token-bucket', rate: 10, fail: 'closed' } },
      { breaker: { failures: 1, coolDown: '1s' } },
    );
    store.fault = 'down';
    const first = await limiter.consume('p', 'k');
    expect(first).toMatchObject({ allowed: false, source: 'fallback', remaining: 0 });
    expect(first.retryAfterMs).toBe(1000);
    c.advance(400);
    expect((await limiter.consume('p', 'k')).retryAfterMs).toBe(600);
  });
});

describe('write-back when the store answers again', () => {
  const policies = { p: { algorithm: 'token-bucket' as const, rate: 1, period: DAY, burst: 100 } };

  async function outage(fault: 'down' | 'lost-reply') {
    const env = setup(policies, { expectedInstances: 4 });
    const { c, store, limiter } = env;
    store.fault = 'down';
    const admitted = (await drive(limiter, c, 100)).filter((d) => d.allowed).length;
    expect(admitted, 'the local share of a burst of 100 over 4 instances').toBe(25);
    store.fault = fault;
    store.only = 'token_bucket_debit';
    await settle(); // the last refused lease call is still unwinding
    c.advance(1000);
    // This request's lease call is the probe. It runs in the background (no request waits on a
    // suspended store); its success triggers the write-back and its lease serves the next request.
    expect(await limiter.consume('p', 'k')).toMatchObject({ source: 'fallback' });
    await settle();
    expect(limiter.stats().breaker).toBe('closed');
    expect(await limiter.consume('p', 'k')).toMatchObject({ allowed: true, source: 'lease' });
    return env;
  }

  it('debits the shared bucket by exactly what the fallback admitted', async () => {
    const { store, limiter, level } = await outage('down');
    store.fault = 'none';
    await limiter.close();
    expect(store.applied.get('token_bucket_debit')).toBe(1);
    expect(await level('p', 'k'), '100 - 25 admitted in the outage - 1 after it').toBe(74);
    expect(limiter.stats()).toMatchObject({ tokensWrittenBack: 25, tokensNotWrittenBack: 0 });
  });

  it('never sends a write-back twice when its reply was lost (it may have been applied)', async () => {
    const { store, limiter, level } = await outage('lost-reply');
    await limiter.close();
    expect(store.applied.get('token_bucket_debit'), 'applied once, not re-sent').toBe(1);
    expect(await level('p', 'k')).toBe(74);
    expect(limiter.stats()).toMatchObject({ tokensWrittenBack: 0, tokensNotWrittenBack: 25 });
  });
});

describe('multi-rule checks during an outage', () => {
  it('refunds a fallback admission when another rule denies', async () => {
    const { c, store, limiter, level } = setup(
      {
        p: { algorithm: 'token-bucket', rate: 1, period: DAY, burst: 40 },
        strict: { algorithm: 'token-bucket', rate: 1, period: DAY, burst: 40, fail: 'closed' },
      },
      { expectedInstances: 4 },
    );
    store.fault = 'down';
    const both = await limiter.consume([
      { policy: 'p', key: 'k' },
      { policy: 'strict', key: 'k' },
    ]);
    expect(both).toMatchObject({ allowed: false, policy: 'strict', source: 'fallback' });
    const alone = [];
    for (let i = 0; i < 11; i++) alone.push((await limiter.consume('p', 'k')).allowed);
    expect(alone, 'the refunded token is back in the local bucket of 10').toEqual([
      ...Array(10).fill(true),
      false,
    ]);
    store.fault = 'none';
    c.advance(1000);
    await limiter.close();
    expect(await level('p', 'k'), 'only the 10 admitted are written back').toBe(30);
  });
});

describe('what observers hear', () => {
  it('fail-policy decisions as failed-open / failed-closed with source fallback, and breaker changes', async () => {
    const events: string[] = [];
    const observer = {
      decision: (e: { outcome: string; source: string; policy: string }) =>
        events.push(`${e.policy} ${e.outcome} ${e.source}`),
      breaker: (e: { state: string }) => events.push(`breaker ${e.state}`),
    };
    const { c, store, limiter } = setup(
      {
        loose: { algorithm: 'token-bucket', rate: 10, fail: 'open' },
        strict: { algorithm: 'token-bucket', rate: 10, fail: 'closed' },
      },
      { observers: [observer], breaker: { failures: 1, coolDown: 100 } },
    );
    store.fault = 'down';
    await limiter.consume('loose', 'k');
    await limiter.consume('strict', 'k');
    store.fault = 'none';
    await settle();
    c.advance(100);
    await limiter.consume('loose', 'k'); // the probe, in the background
    await settle();
    // Decisions and breaker changes each in order (how the two interleave is scheduling detail).
    expect(events.filter((e) => e.startsWith('breaker'))).toEqual([
      'breaker open',
      'breaker half-open',
      'breaker closed',
    ]);
    expect(events.filter((e) => !e.startsWith('breaker'))).toEqual([
      'loose failed-open fallback',
      'strict failed-closed fallback',
      'loose failed-open fallback', // decided without waiting, while the probe runs
    ]);
  });
});

describe('configuration', () => {
  it.each([
    [{ policies: { p: { algorithm: 'token-bucket', rate: 1, fail: 'sometimes' } } }, 'policies.p.fail'],
    [{ policies: { p: { algorithm: 'token-bucket', rate: 1 } }, expectedInstances: 0 }, 'expectedInstances'],
    [
      { policies: { p: { algorithm: 'token-bucket', rate: 1 } }, breaker: { failures: -1 } },
      'breaker.failures',
    ],
    // Found by the fuzz test: rates that underflow or refill times Redis cannot express as a TTL.
    [{ policies: { p: { algorithm: 'token-bucket', rate: 5e-324 } } }, 'policies.p.rate'],
    [{ policies: { p: { algorithm: 'token-bucket', rate: 1, period: 5e-324 } } }, 'policies.p.period'],
    [{ policies: { p: { algorithm: 'token-bucket', rate: 1, burst: 1e16 } } }, 'policies.p.burst'],
    [
      { policies: { p: { algorithm: 'token-bucket', rate: 1, lease: { ahead: 1e13 } } } },
      'policies.p.lease.ahead',
    ],
    [{ policies: { p: { algorithm: 'leaky-bucket', rate: 5e-324 } } }, 'policies.p.rate'],
    [
      { policies: { p: { algorithm: 'leaky-bucket', rate: 1, burst: Number.MAX_VALUE } } },
      'policies.p.burst',
    ],
    [
      { policies: { p: { algorithm: 'fixed-window', limit: 1, window: '1m', fail: 'maybe' } } },
      'policies.p.fail',
    ],
  ])('rejects %j naming %s', (options, field) => {
    const err = (() => {
      try {
        new Limiter(options as never);
      } catch (e) {
        return e;
      }
    })();
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).field).toBe(field);
  });
});
