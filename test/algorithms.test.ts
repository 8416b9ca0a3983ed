import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ArgumentError, ConfigError, Limiter, MemoryStore, type PolicyConfig } from '../src/index.js';

let open: Limiter[] = [];
function limiter(options: ConstructorParameters<typeof Limiter>[0]): Limiter {
  const l = new Limiter({ sweepIntervalMs: 0, ...options });
  open.push(l);
  return l;
}
afterEach(async () => {
  vi.useRealTimers();
  await Promise.all(open.map((l) => l.close()));
  open = [];
});

function clock(start = Date.UTC(2024, 4, 10, 12)) {
  let t = start;
  return { now: () => t, advance: (ms: number) => (t += ms), set: (ms: number) => (t = ms) };
}

/** Limiters sharing one store, as gateway instances share Redis. */
function cluster(n: number, policies: Record<string, PolicyConfig>, c = clock()) {
  const store = new MemoryStore({ now: c.now });
  const make = () => Array.from({ length: n }, () => limiter({ store, policies, now: c.now }));
  return { c, store, instances: make(), make };
}

async function admitted(
  instances: Limiter[],
  requests: number,
  call: (l: Limiter, i: number) => Promise<{ allowed: boolean }>,
) {
  const ds = await Promise.all(
    Array.from({ length: requests }, (_, i) => call(instances[i % instances.length]!, i)),
  );
  return ds.filter((d) => d.allowed).length;
}

const MIN = 60_000;

describe('fixed window', () => {
  const policies = { q: { algorithm: 'fixed-window', limit: 100, window: '1m', lease: 'exact' } } as const;

  it('admits the limit per window and says when the window ends', async () => {
    const c = clock(10 * MIN + 15_000);
    const l = limiter({ policies, now: c.now });
    for (let i = 0; i < 100; i++) expect((await l.consume('q', 'k')).allowed, `request ${i}`).toBe(true);
    const denied = await l.consume('q', 'k');
    expect(denied).toMatchObject({ allowed: false, limit: 100, remaining: 0, retryAfterMs: 45_000 });
    c.advance(45_000);
    expect(await l.consume('q', 'k')).toMatchObject({ allowed: true, remaining: 99 });
  });

  it('admits 2 × limit across a window edge (100 at the end of a minute + 100 at the start of the next)', async () => {
    const c = clock(10 * MIN + 59_000);
    const l = limiter({ policies, now: c.now });
    let n = 0;
    for (let i = 0; i < 100; i++) if ((await l.consume('q', 'k')).allowed) n++;
    c.advance(1000); // the next minute
    for (let i = 0; i < 100; i++) if ((await l.consume('q', 'k')).allowed) n++;
    expect(n, 'both windows are independent: 200 pass within one second').toBe(200);
  });

  it('counts calendar months in UTC', async () => {
    const c = clock(Date.UTC(2024, 1, 29, 23, 59, 59));
    const l = limiter({
      policies: { m: { algorithm: 'fixed-window', limit: 2, window: 'month', lease: 'exact' } },
      now: c.now,
    });
    await l.consume('m', 'k');
    await l.consume('m', 'k');
    expect(await l.consume('m', 'k')).toMatchObject({ allowed: false, retryAfterMs: 1000 });
    c.set(Date.UTC(2024, 2, 1));
    expect((await l.consume('m', 'k')).allowed, 'March has a fresh quota').toBe(true);
  });

  it('leased: never more than the limit across instances, and close() returns every unused slice', async () => {
    const { instances, make } = cluster(5, {
      d: { algorithm: 'fixed-window', limit: 1000, window: '1d' },
    });
    const first = await admitted(instances, 3000, (l) => l.consume('d', 'k'));
    expect(first).toBeLessThanOrEqual(1000);
    await Promise.all(instances.map((l) => l.close()));
    const second = await admitted(make(), 3000, (l) => l.consume('d', 'k'));
    expect(first + second, `first round ${first}, second ${second}`).toBe(1000);
  });

  it('leased: a slice never carries quota into the next window', async () => {
    const { c, instances } = cluster(4, { q: { algorithm: 'fixed-window', limit: 100, window: '1m' } });
    const perWindow = new Map<number, number>();
    // 4 instances at 400 req/s total for 3 minutes: each minute is oversubscribed 240x.
    for (let step = 0; step < 3 * 60 * 100; step++) {
      c.advance(10);
      const ds = await Promise.all(instances.map((l) => l.consume('q', 'k')));
      const w = Math.floor(c.now() / MIN);
      perWindow.set(w, (perWindow.get(w) ?? 0) + ds.filter((d) => d.allowed).length);
    }
    for (const [w, n] of perWindow) expect(n, `window ${w}`).toBeLessThanOrEqual(100);
    expect([...perWindow.values()].reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(290);
  });

  it('runs a typical API-key plan: 100 req/s token bucket and 1M/day quota per API key as two rules of one request', async () => {
    const plan = {
      'per-key': { algorithm: 'token-bucket', rate: 100, period: '1s', burst: 100 },
      daily: { algorithm: 'fixed-window', limit: 1_000_000, window: '1d' },
    } as const;
    const { c, store, instances } = cluster(4, plan, clock(Date.UTC(2024, 4, 10, 12)));
    const checks = [
      { policy: 'per-key', key: 'api-key-7' },
      { policy: 'daily', key: 'api-key-7' },
    ];
    let allowed = 0;
    // 600 req/s for 10 s through 4 gateway instances.
    for (let ms = 0; ms < 10_000; ms += 5) {
      c.advance(5);
      const d = await instances[(ms / 5) % 4]!.consume(checks);
      if (d.allowed) allowed++;
    }
    expect(allowed, 'the per-second rule governs: ~100/s plus the burst').toBeGreaterThan(1000);
    expect(allowed).toBeLessThanOrEqual(1100);
    await Promise.all(instances.map((l) => l.close()));
    // The day's counter holds exactly the admitted requests: refused ones were refunded.
    const exact = limiter({
      store,
      policies: { daily: { ...plan.daily, lease: 'exact' } },
      now: c.now,
    });
    expect((await exact.consume('daily', 'api-key-7')).remaining).toBe(1_000_000 - allowed - 1);
  });

  it('refuses on the quota with the time until UTC midnight, refunding the per-second tokens', async () => {
    const c = clock(Date.UTC(2024, 4, 10, 23, 0));
    const l = limiter({
      policies: {
        'per-key': { algorithm: 'token-bucket', rate: 100, burst: 100 },
        daily: { algorithm: 'fixed-window', limit: 20, window: '1d', lease: 'exact' },
      },
      now: c.now,
    });
    const checks = [
      { policy: 'per-key', key: 'k' },
      { policy: 'daily', key: 'k' },
    ];
    for (let i = 0; i < 20; i++) expect((await l.consume(checks)).allowed).toBe(true);
    for (let i = 0; i < 30; i++) {
      expect(await l.consume(checks)).toMatchObject({
        allowed: false,
        policy: 'daily',
        retryAfterMs: 3_600_000,
      });
    }
    expect((await l.consume('per-key', 'k', 80)).allowed, 'refused checks took nothing per second').toBe(
      true,
    );
  });
});

describe('sliding window counter', () => {
  it('is smooth at the window edge, unlike the fixed window', async () => {
    const c = clock(10 * MIN + 59_000);
    const l = limiter({
      policies: { s: { algorithm: 'sliding-window', limit: 100, window: '1m', lease: 'exact' } },
      now: c.now,
    });
    let n = 0;
    for (let i = 0; i < 100; i++) if ((await l.consume('s', 'k')).allowed) n++;
    c.advance(2000);
    for (let i = 0; i < 100; i++) if ((await l.consume('s', 'k')).allowed) n++;
    expect(n, 'one second into the next minute the previous one still weighs 59/60').toBe(101);
  });

  it('leased: never more than the limit across instances, and close() returns every unused slice', async () => {
    const { instances, make } = cluster(5, { s: { algorithm: 'sliding-window', limit: 500, window: '1h' } });
    const first = await admitted(instances, 2000, (l) => l.consume('s', 'k'));
    expect(first).toBeLessThanOrEqual(500);
    await Promise.all(instances.map((l) => l.close()));
    const second = await admitted(make(), 2000, (l) => l.consume('s', 'k'));
    expect(first + second, `first round ${first}, second ${second}`).toBe(500);
  });
});

describe('sliding log', () => {
  it('never holds more than the limit in any window, through the limiter', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.record({ gap: fc.integer({ min: 0, max: 300 }), cost: fc.integer({ min: 1, max: 3 }) }), {
          maxLength: 120,
        }),
        async (arrivals) => {
          const c = clock();
          const l = new Limiter({
            sweepIntervalMs: 0,
            policies: { log: { algorithm: 'sliding-log', limit: 7, window: '1s' } },
            now: c.now,
          });
          const admittedAt: { t: number; cost: number }[] = [];
          for (const a of arrivals) {
            c.advance(a.gap);
            if ((await l.consume('log', 'k', a.cost)).allowed) admittedAt.push({ t: c.now(), cost: a.cost });
          }
          await l.close();
          for (const end of admittedAt) {
            const held = admittedAt.filter((a) => a.t > end.t - 1000 && a.t <= end.t);
            expect(held.reduce((s, a) => s + a.cost, 0)).toBeLessThanOrEqual(7);
          }
        },
      ),
      { numRuns: 60 },
    );
  });

  it('answers a refused key from memory until enough entries have left the window', async () => {
    const c = clock();
    const l = limiter({
      policies: { log: { algorithm: 'sliding-log', limit: 3, window: '1s' } },
      now: c.now,
    });
    for (let i = 0; i < 3; i++) {
      await l.consume('log', 'k');
      c.advance(100);
    }
    const denied = await l.consume('log', 'k');
    expect(denied).toMatchObject({ allowed: false, retryAfterMs: 700 });
    const calls = l.stats().storeCalls;
    for (let i = 0; i < 10; i++) expect((await l.consume('log', 'k')).allowed).toBe(false);
    expect(l.stats().storeCalls, 'the deny cache applies').toBe(calls);
    c.advance(700);
    expect((await l.consume('log', 'k')).allowed).toBe(true);
  });

  it('takes the entries of a refused multi-rule check back out of the log', async () => {
    const c = clock();
    const l = limiter({
      policies: {
        log: { algorithm: 'sliding-log', limit: 5, window: '1m' },
        tight: { algorithm: 'token-bucket', rate: 1, period: '1h', burst: 1 },
      },
      now: c.now,
    });
    const checks = [
      { policy: 'log', key: 'k', cost: 2 },
      { policy: 'tight', key: 'k' },
    ];
    expect((await l.consume(checks)).allowed).toBe(true);
    expect((await l.consume(checks)).allowed).toBe(false);
    expect(await l.consume('log', 'k', 3)).toMatchObject({ allowed: true, remaining: 0 });
  });

  it('quantised mode keeps the guarantee with one counter per bucket', async () => {
    const c = clock(0);
    const l = limiter({
      policies: { log: { algorithm: 'sliding-log', limit: 3, window: '1s', quantum: '100ms' } },
      now: c.now,
    });
    c.set(150);
    for (let i = 0; i < 3; i++) expect((await l.consume('log', 'k')).allowed).toBe(true);
    c.set(1150);
    // The exact log would admit at 1150; the bucket [100, 200) counts until 1200.
    expect(await l.consume('log', 'k')).toMatchObject({ allowed: false, retryAfterMs: 50 });
    c.set(1200);
    expect((await l.consume('log', 'k')).allowed).toBe(true);
  });

  it('counts whole requests: a fractional cost is an argument error', async () => {
    const l = limiter({ policies: { log: { algorithm: 'sliding-log', limit: 3, window: '1s' } } });
    const err = await l.consume('log', 'k', 1.5).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ArgumentError);
    expect((err as ArgumentError).field).toBe('cost');
  });
});

describe('leaky bucket', () => {
  // 10 per second: one turn every 100 ms.
  const policies = { shape: { algorithm: 'leaky-bucket', rate: 10, burst: 2, maxWait: '1s' } } as const;

  it('consume admits the burst at once, then only as the bucket drains', async () => {
    const c = clock();
    const l = limiter({ policies, now: c.now });
    expect((await l.consume('shape', 'k')).allowed).toBe(true);
    expect((await l.consume('shape', 'k')).allowed).toBe(true);
    expect(await l.consume('shape', 'k')).toMatchObject({ allowed: false, retryAfterMs: 100, limit: 2 });
    c.advance(100);
    expect((await l.consume('shape', 'k')).allowed).toBe(true);
  });

  it('reserve says how long to wait and refuses only beyond the bound', async () => {
    const c = clock();
    const l = limiter({ policies, now: c.now });
    const delays = [];
    for (let i = 0; i < 6; i++) delays.push((await l.reserve('shape', 'k', 1, { maxWaitMs: 300 })).delayMs);
    expect(delays).toEqual([0, 0, 100, 200, 300, 0]);
    const refused = await l.reserve('shape', 'k', 1, { maxWaitMs: 300 });
    expect(refused).toMatchObject({ allowed: false, delayMs: 0, retryAfterMs: 100 });
  });

  it('wait() resolves when the turn comes, on timers', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const c = clock();
    const l = limiter({ policies, now: c.now });
    await l.wait('shape', 'k');
    await l.wait('shape', 'k');
    let done = false;
    const third = l.wait('shape', 'k').then((d) => {
      done = true;
      return d;
    });
    await vi.advanceTimersByTimeAsync(99);
    expect(done, 'still waiting for its turn').toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect((await third).allowed).toBe(true);
  });

  it('wait() refuses at once when the turn is further off than maxWaitMs', async () => {
    const c = clock();
    const l = limiter({ policies, now: c.now });
    for (let i = 0; i < 5; i++) await l.reserve('shape', 'k', 1, { maxWaitMs: 1000 });
    expect(await l.wait('shape', 'k', 1, { maxWaitMs: 250 })).toMatchObject({
      allowed: false,
      retryAfterMs: 150,
    });
  });

  it('a cancelled wait gives its turn back', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const c = clock();
    const l = limiter({ policies, now: c.now });
    await l.reserve('shape', 'k', 2);
    const controller = new AbortController();
    const waiting = l.wait('shape', 'k', 1, { signal: controller.signal });
    await vi.advanceTimersByTimeAsync(10);
    controller.abort(new Error('client went away'));
    await expect(waiting).rejects.toThrow('client went away');
    // Without the cancelled turn the next one is 100 ms after the burst, not 200.
    expect((await l.reserve('shape', 'k')).delayMs).toBe(100);
  });

  it('an already aborted signal rejects without taking a turn', async () => {
    const c = clock();
    const l = limiter({ policies, now: c.now });
    const err = await l.wait('shape', 'k', 1, { signal: AbortSignal.abort() }).catch((e: unknown) => e);
    expect((err as Error).name).toBe('AbortError');
    expect(l.stats().storeCalls).toBe(0);
  });

  it('reserve and wait are for leaky-bucket policies only', async () => {
    const l = limiter({ policies: { b: { algorithm: 'token-bucket', rate: 1 } } });
    const err = await l.wait('b', 'k').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ArgumentError);
    expect((err as ArgumentError).message).toMatch(/token-bucket policy: use consume\(\)/);
  });
});

describe('concurrency', () => {
  const exact = { c: { algorithm: 'concurrency', limit: 2, slotTtl: '10s', lease: 'exact' } } as const;

  it('holds at most the limit; release() frees a slot and is idempotent', async () => {
    const c = clock();
    const l = limiter({ policies: exact, now: c.now });
    const a = await l.acquire('c', 'k');
    const b = await l.acquire('c', 'k');
    expect([a.allowed, b.allowed]).toEqual([true, true]);
    const refused = await l.acquire('c', 'k');
    expect(refused).toMatchObject({ allowed: false, retryAfterMs: 10_000, remaining: 0 });
    await refused.release();
    await a.release();
    await a.release();
    expect((await l.acquire('c', 'k')).allowed).toBe(true);
    expect((await l.acquire('c', 'k')).allowed, 'the double release freed only one slot').toBe(false);
  });

  it('expires the slots of an instance that died, after the slot TTL', async () => {
    const { c, instances } = cluster(2, exact);
    const [dead, alive] = instances as [Limiter, Limiter];
    await dead.acquire('c', 'k');
    await dead.acquire('c', 'k');
    expect((await alive.acquire('c', 'k')).allowed).toBe(false);
    c.advance(10_000);
    expect((await alive.acquire('c', 'k')).allowed).toBe(true);
  });

  it('renews the slots it holds on the sweep, so a long request keeps its slot', async () => {
    const { c, instances } = cluster(2, exact);
    const [holder, other] = instances as [Limiter, Limiter];
    const held = await holder.acquire('c', 'k', { cost: 2 });
    for (let i = 0; i < 10; i++) {
      c.advance(4_000);
      holder.sweep();
      await new Promise((resolve) => setImmediate(resolve)); // the renewal's store call
    }
    expect((await other.acquire('c', 'k')).allowed, '40 s later').toBe(false);
    await held.release();
    expect((await other.acquire('c', 'k')).allowed).toBe(true);
  });

  it('leased: reuses a block of slots locally instead of a store call per acquire and release', async () => {
    const c = clock();
    const l = limiter({ policies: { c: { algorithm: 'concurrency', limit: 100 } }, now: c.now });
    for (let i = 0; i < 200; i++) {
      const handles = await Promise.all([l.acquire('c', 'k'), l.acquire('c', 'k'), l.acquire('c', 'k')]);
      expect(handles.every((h) => h.allowed)).toBe(true);
      await Promise.all(handles.map((h) => h.release()));
    }
    expect(l.stats().storeCalls, '1200 acquires and releases').toBeLessThan(10);
  });

  it('leased: never more than the limit across instances, and close() returns free slots', async () => {
    const { instances, make } = cluster(5, { c: { algorithm: 'concurrency', limit: 20 } });
    const first = await admitted(instances, 50, (l) => l.acquire('c', 'k'));
    expect(first).toBeLessThanOrEqual(20);
    await Promise.all(instances.map((l) => l.close()));
    const second = await admitted(make(), 50, (l) => l.acquire('c', 'k'));
    expect(first + second, `first round ${first}, second ${second}`).toBe(20);
  });

  it('keeps renewing slots in use after the LRU evicted their key', async () => {
    const c = clock();
    const store = new MemoryStore({ now: c.now });
    const holder = limiter({ store, policies: exact, now: c.now, maxKeys: 1 });
    const other = limiter({ store, policies: exact, now: c.now });
    const held = await holder.acquire('c', 'a', { cost: 2 });
    await holder.acquire('c', 'b'); // evicts 'a' from the holder's LRU
    for (let i = 0; i < 10; i++) {
      c.advance(4_000);
      holder.sweep();
      await new Promise((resolve) => setImmediate(resolve));
    }
    expect((await other.acquire('c', 'a')).allowed, '40 s later, still held').toBe(false);
    await held.release();
    expect((await other.acquire('c', 'a', { cost: 2 })).allowed).toBe(true);
  });

  it('frees a slot released after close()', async () => {
    const { instances, make } = cluster(1, exact);
    const h = await instances[0]!.acquire('c', 'k', { cost: 2 });
    await instances[0]!.close();
    await h.release();
    expect((await make()[0]!.acquire('c', 'k', { cost: 2 })).allowed).toBe(true);
  });

  it('is used through acquire(), not consume()', async () => {
    const l = limiter({ policies: exact });
    const err = await l.consume('c', 'k').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ArgumentError);
    expect((err as ArgumentError).field).toBe('policy');
    const multi = await l.consume([{ policy: 'c', key: 'k' }]).catch((e: unknown) => e);
    expect((multi as ArgumentError).field).toBe('checks[0].policy');
  });
});

describe("lease: 'exact' (the simulator's reference)", () => {
  it.each([
    ['fixed-window', { algorithm: 'fixed-window', limit: 100, window: '1m', lease: 'exact' }],
    ['sliding-window', { algorithm: 'sliding-window', limit: 100, window: '1m', lease: 'exact' }],
    ['sliding-log', { algorithm: 'sliding-log', limit: 100, window: '1m', lease: 'exact' }],
    ['leaky-bucket', { algorithm: 'leaky-bucket', rate: 100, burst: 100, lease: 'exact' }],
    ['token-bucket', { algorithm: 'token-bucket', rate: 100, lease: 'exact' }],
  ] as const)('%s: one store call per admitted decision', async (_, policy) => {
    const l = limiter({ policies: { p: policy } });
    for (let i = 0; i < 7; i++) expect((await l.consume('p', 'k')).allowed).toBe(true);
    expect(l.stats().storeCalls).toBe(7);
  });
});

describe('policy validation', () => {
  it.each([
    [{ algorithm: 'fixed-window', limit: 0, window: '1m' }, 'policies.p.limit'],
    [{ algorithm: 'fixed-window', limit: 10, window: 'fortnight' }, 'policies.p.window'],
    [
      { algorithm: 'fixed-window', limit: 10, window: '1m', lease: { maxFraction: 2 } },
      'policies.p.lease.maxFraction',
    ],
    [{ algorithm: 'fixed-window', limit: 10, window: '1m', lease: { ttl: 'soon' } }, 'policies.p.lease.ttl'],
    [{ algorithm: 'sliding-window', limit: 10, window: 'month' }, 'policies.p.window'],
    [{ algorithm: 'sliding-window', limit: 10, window: '1m', lease: 'fast' }, 'policies.p.lease'],
    [{ algorithm: 'sliding-log', limit: 2.5, window: '1m' }, 'policies.p.limit'],
    [{ algorithm: 'sliding-log', limit: 10, window: '1s', quantum: '2s' }, 'policies.p.quantum'],
    [{ algorithm: 'sliding-log', limit: 10, window: '1d', quantum: '1s' }, 'policies.p.quantum'],
    [{ algorithm: 'sliding-log', limit: 10, window: '1m', lease: { maxFraction: 0.1 } }, 'policies.p.lease'],
    [{ algorithm: 'leaky-bucket', rate: -1 }, 'policies.p.rate'],
    [{ algorithm: 'leaky-bucket', rate: 1, burst: 0 }, 'policies.p.burst'],
    [{ algorithm: 'leaky-bucket', rate: 1, maxWait: 'later' }, 'policies.p.maxWait'],
    [{ algorithm: 'concurrency', limit: 0.5 }, 'policies.p.limit'],
    [{ algorithm: 'concurrency', limit: 5, slotTtl: 0 }, 'policies.p.slotTtl'],
    [{ algorithm: 'concurrency', limit: 5, lease: { maxFraction: 0 } }, 'policies.p.lease.maxFraction'],
  ])('rejects %j naming %s', (policy, field) => {
    try {
      new Limiter({ policies: { p: policy as never } });
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as ConfigError).field).toBe(field);
    }
  });

  it('rejects a bad maxWaitMs or signal naming the option', async () => {
    const l = limiter({ policies: { s: { algorithm: 'leaky-bucket', rate: 1 } } });
    for (const [options, field] of [
      [{ maxWaitMs: -1 }, 'options.maxWaitMs'],
      [{ maxWaitMs: Number.NaN }, 'options.maxWaitMs'],
      [{ signal: {} }, 'options.signal'],
    ] as const) {
      const err = await l.wait('s', 'k', 1, options as never).catch((e: unknown) => e);
      expect((err as ArgumentError).field).toBe(field);
    }
  });
});
