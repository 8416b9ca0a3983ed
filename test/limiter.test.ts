import { afterEach, describe, expect, it } from 'vitest';
import {
  ArgumentError,
  ClosedError,
  ConfigError,
  type Decision,
  Limiter,
  MemoryStore,
  type PolicyConfig,
  type TokenBucketPolicy,
} from '../src/index.js';

const bucket = (rate: number, burst = rate, extra: Partial<TokenBucketPolicy> = {}): PolicyConfig => ({
  algorithm: 'token-bucket',
  rate,
  period: '1s',
  burst,
  ...extra,
});

let open: Limiter[] = [];
function limiter(options: ConstructorParameters<typeof Limiter>[0]): Limiter {
  const l = new Limiter({ sweepIntervalMs: 0, ...options });
  open.push(l);
  return l;
}
afterEach(async () => {
  await Promise.all(open.map((l) => l.close()));
  open = [];
});

function clock(start = 1_000_000) {
  let t = start;
  return { now: () => t, advance: (ms: number) => (t += ms) };
}

describe('Limiter', () => {
  it('admits a burst, then denies with the time until one token refills', async () => {
    const c = clock();
    const l = limiter({ policies: { p: bucket(10) }, now: c.now });
    for (let i = 0; i < 10; i++) expect((await l.consume('p', 'k')).allowed, `request ${i}`).toBe(true);
    const denied = await l.consume('p', 'k');
    expect(denied).toMatchObject({ allowed: false, policy: 'p', key: 'k', limit: 10, remaining: 0 });
    expect(denied.retryAfterMs).toBeGreaterThan(0);
    expect(denied.retryAfterMs).toBeLessThanOrEqual(100);
    c.advance(denied.retryAfterMs);
    expect((await l.consume('p', 'k')).allowed, 'after retryAfterMs').toBe(true);
  });

  it('reports limit, remaining and reset on allowed decisions', async () => {
    const c = clock();
    const l = limiter({ policies: { p: bucket(100) }, now: c.now });
    const d = await l.consume('p', 'k', 5);
    expect(d).toMatchObject({ allowed: true, limit: 100, retryAfterMs: 0 });
    expect(d.remaining).toBe(95);
    expect(d.resetMs).toBe(50);
  });

  it('denies a cost above the burst with retryAfterMs Infinity', async () => {
    const l = limiter({ policies: { p: bucket(10) } });
    const d = await l.consume('p', 'k', 11);
    expect(d.allowed).toBe(false);
    expect(d.retryAfterMs).toBe(Number.POSITIVE_INFINITY);
  });

  it('never admits more than the burst across instances sharing a store, and close() hands leases back', async () => {
    const c = clock();
    const store = new MemoryStore({ now: c.now });
    const policies = { p: bucket(1, 50, { period: '1d' }) };
    const instances = Array.from({ length: 5 }, () => limiter({ store, policies, now: c.now }));
    const round = () =>
      Promise.all(Array.from({ length: 100 }, (_, i) => instances[i % 5]!.consume('p', 'k'))).then(
        (ds) => ds.filter((d) => d.allowed).length,
      );
    const first = await round();
    expect(first).toBeLessThanOrEqual(50);
    await Promise.all(instances.map((l) => l.close()));
    const fresh = Array.from({ length: 5 }, () => limiter({ store, policies, now: c.now }));
    instances.splice(0, 5, ...fresh);
    expect(first + (await round()), 'every leased token came back').toBe(50);
  });

  it('multi-rule consume is all-or-nothing', async () => {
    const c = clock();
    const l = limiter({ policies: { fast: bucket(100), tight: bucket(1, 2, { period: '1h' }) }, now: c.now });
    const checks = [
      { policy: 'fast', key: 'k' },
      { policy: 'tight', key: 'k' },
    ];
    expect((await l.consume(checks)).allowed).toBe(true);
    expect((await l.consume(checks)).allowed).toBe(true);
    const denied = await l.consume(checks);
    expect(denied).toMatchObject({ allowed: false, policy: 'tight' });
    expect((await l.consume('fast', 'k', 98)).allowed, 'the refused check took nothing from `fast`').toBe(
      true,
    );
  });

  it('multi-rule consume refunds a rule decided locally when a rule decided by the store refuses', async () => {
    const c = clock();
    const policies = { fast: bucket(100), tight: bucket(1, 2, { period: '1h', lease: 'exact' }) };
    const l = limiter({ policies, now: c.now });
    const checks = [
      { policy: 'fast', key: 'k' },
      { policy: 'tight', key: 'k' },
    ];
    // Each lets the refill ahead land, so that `fast` holds a lease.
    for (let i = 0; i < 2; i++) {
      expect((await l.consume(checks)).allowed).toBe(true);
      await new Promise((resolve) => setImmediate(resolve));
    }
    const local = l.stats().localDecisions;
    const denied = await l.consume(checks);
    expect(l.stats().localDecisions - local, '`fast` answered from its lease, `tight` by the store').toBe(1);
    expect(denied).toMatchObject({ allowed: false, policy: 'tight' });
    expect(denied.checks?.[0], '`fast` reports what is left after the refund').toMatchObject({
      allowed: true,
      remaining: 98,
    });
    expect((await l.consume('fast', 'k', 98)).allowed, 'the refused check took nothing from `fast`').toBe(
      true,
    );
  });

  it('repeated multi-rule checks keep the LRU order exact: the least recent state is the one evicted', async () => {
    const c = clock();
    const store = new MemoryStore({ now: c.now });
    const l = limiter({ store, policies: { a: bucket(100), b: bucket(100) }, now: c.now, maxKeys: 3 });
    const both = [
      { policy: 'a', key: 'k' },
      { policy: 'b', key: 'k' },
    ];
    await l.consume(both);
    await l.consume('a', 'j'); // a lookup between two identical multi-rule checks
    await l.consume(both); // so this one must refresh a/k and b/k: a/j is now the least recent
    await l.consume('a', 'new'); // evicts a/j
    const held = async (policy: string, key: string) => (await l.peek(policy, key)).source;
    expect(await held('a', 'k'), 'a/k still held').toBe('lease');
    expect(await held('b', 'k'), 'b/k still held').toBe('lease');
    expect(await held('a', 'j'), 'a/j evicted').toBe('store');
  });

  it('a multi-rule consume made by an observer during another decides its own checks, and the outer its own', async () => {
    const c = clock();
    let nested: Promise<Decision> | undefined;
    let armed = false;
    const l = limiter({
      policies: { a: bucket(100), b: bucket(50) },
      now: c.now,
      observers: [
        {
          decision: (e) => {
            if (armed && e.key === 'outer' && e.policy === 'a') {
              nested ??= l.consume([
                { policy: 'b', key: 'inner' },
                { policy: 'a', key: 'inner' },
              ]);
            }
          },
        },
      ],
    });
    // Leases held for both keys first, so that both consumes decide locally: the observer then
    // hears the outer's first decision while the outer is still deciding its second.
    const both = (key: string) => [
      { policy: 'a', key },
      { policy: 'b', key },
    ];
    for (const key of ['outer', 'inner']) {
      while ((await l.consume(both(key))).checks?.some((d) => d.source !== 'lease'));
    }
    const left = async (policy: string, key: string) => (await l.peek(policy, key)).remaining;
    const before = {
      a: await left('a', 'outer'),
      b: await left('b', 'outer'),
      ai: await left('a', 'inner'),
      bi: await left('b', 'inner'),
    };
    armed = true;
    const outer = await l.consume([
      { policy: 'a', key: 'outer' },
      { policy: 'b', key: 'outer' },
    ]);
    const inner = await nested;
    const seen = (d: Decision | undefined) =>
      d?.checks?.map(({ policy, key, remaining, source }) => ({ policy, key, remaining, source }));
    expect(seen(outer), 'the outer consume decided a then b for "outer", from its leases').toEqual([
      { policy: 'a', key: 'outer', remaining: before.a - 1, source: 'lease' },
      { policy: 'b', key: 'outer', remaining: before.b - 1, source: 'lease' },
    ]);
    expect(seen(inner), 'the nested one decided b then a for "inner"').toEqual([
      { policy: 'b', key: 'inner', remaining: before.bi - 1, source: 'lease' },
      { policy: 'a', key: 'inner', remaining: before.ai - 1, source: 'lease' },
    ]);
  });

  it('exact mode goes to the store for every admitted request', async () => {
    const store = new MemoryStore();
    const l = limiter({ store, policies: { p: bucket(10, 10, { lease: 'exact' }) } });
    for (let i = 0; i < 5; i++) await l.consume('p', 'k');
    expect(l.stats().storeCalls).toBe(5);
  });

  it('holds at most maxKeys entries and returns the evicted lease', async () => {
    const c = clock();
    const store = new MemoryStore({ now: c.now });
    const l = limiter({ store, policies: { p: bucket(100) }, now: c.now, maxKeys: 10 });
    for (let i = 0; i < 100; i++) await l.consume('p', `k${i}`);
    expect(l.stats().keys).toBeLessThanOrEqual(10);
    await l.close();
    expect(l.stats().tokensReturned).toBe(l.stats().tokensLeased - 100);
  });

  describe('bad input', () => {
    it.each([
      [{ p: { algorithm: 'nope', rate: 1 } }, 'policies.p.algorithm'],
      [{ p: bucket(0) }, 'policies.p.rate'],
      [{ p: bucket(Number.NaN) }, 'policies.p.rate'],
      [{ p: bucket(10, -1) }, 'policies.p.burst'],
      [{ p: bucket(10, Number.POSITIVE_INFINITY) }, 'policies.p.burst'],
      [{ p: bucket(10, 10, { period: 'often' as never }) }, 'policies.p.period'],
      [{ p: bucket(10, 10, { lease: { maxFraction: 2 } }) }, 'policies.p.lease.maxFraction'],
      [{}, 'policies'],
    ])('rejects policies %j naming %s', (policies, field) => {
      try {
        new Limiter({ policies: policies as never });
        expect.unreachable();
      } catch (err) {
        expect(err).toBeInstanceOf(ConfigError);
        expect((err as ConfigError).field).toBe(field);
        expect((err as ConfigError).code).toBe('ERR_TOKENLEASE_CONFIG');
      }
    });

    it.each([
      [['nope', 'k', 1], 'policy'],
      [['p', 42, 1], 'key'],
      [['p', 'k', 0], 'cost'],
      [['p', 'k', -1], 'cost'],
      [['p', 'k', Number.NaN], 'cost'],
      [['p', 'k', Number.POSITIVE_INFINITY], 'cost'],
      [[[{ policy: 'p', key: 'k', cost: 0 }]], 'checks[0].cost'],
      [[[]], 'checks'],
    ])('rejects consume(%j) naming %s', async (args, field) => {
      const l = limiter({ policies: { p: bucket(10) } });
      const err = await (l.consume as (...a: unknown[]) => Promise<unknown>)(...args).catch(
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(ArgumentError);
      expect((err as ArgumentError).field).toBe(field);
    });

    it('works with any string key', async () => {
      const l = limiter({ policies: { p: bucket(10) } });
      for (const key of ['', '{}', '}{', 'ключ 🔑', 'x'.repeat(10_240), '\udc00']) {
        expect((await l.consume('p', key)).allowed).toBe(true);
      }
    });

    it('throws ClosedError after close()', async () => {
      const l = limiter({ policies: { p: bucket(10) } });
      await l.close();
      await l.close();
      await expect(l.consume('p', 'k')).rejects.toBeInstanceOf(ClosedError);
    });
  });
});

describe('describe()', () => {
  it("a calendar month's window is as long as the month the clock is in, as the month changes", () => {
    let now = Date.UTC(2026, 0, 31, 23, 59, 59); // the last second of January
    const l = limiter({
      policies: { monthly: { algorithm: 'fixed-window', limit: 1000, window: 'month' } },
      now: () => now,
    });
    expect(l.describe('monthly')).toEqual({ limit: 1000, windowSeconds: 31 * 86_400 });
    now += 1000; // February
    expect(l.describe('monthly')).toEqual({ limit: 1000, windowSeconds: 28 * 86_400 });
  });

  it('answers a fresh object each time and follows setPolicies', () => {
    const l = limiter({ policies: { p: bucket(10) } });
    const first = l.describe('p');
    first.limit = 1;
    expect(l.describe('p'), 'a caller changing its answer changes nothing').toEqual({
      limit: 10,
      windowSeconds: 1,
    });
    l.setPolicies({ p: bucket(20) });
    expect(l.describe('p')).toEqual({ limit: 20, windowSeconds: 1 });
  });

  it('reads the clock only for rules with windows (the HTTP adapters ask on every request)', () => {
    let reads = 0;
    const l = limiter({
      policies: { p: bucket(10), w: { algorithm: 'fixed-window', limit: 10, window: '1m' } },
      now: () => {
        reads++;
        return 1_000_000;
      },
    });
    const before = reads;
    for (let i = 0; i < 3; i++) l.describe('p');
    expect(reads - before, 'a token bucket').toBe(0);
    l.describe('w');
    expect(reads - before, 'a fixed window').toBe(1);
  });
});

describe('the local table (maxKeys)', () => {
  it('a multi-rule consume of a key whose states were evicted since its last one opens fresh states', async () => {
    const l = limiter({
      store: new MemoryStore(),
      policies: { a: bucket(1e6, 1e9), b: bucket(1e6, 1e9) },
      maxKeys: 4,
    });
    const both = [
      { policy: 'a', key: 'k' },
      { policy: 'b', key: 'k' },
    ];
    await l.consume(both);
    for (const key of ['w', 'x', 'y', 'z']) await l.consume('a', key); // evicts both states of k
    expect((await l.peek('a', 'k')).source, 'k is no longer held').toBe('store');
    await l.consume(both);
    for (const policy of ['a', 'b']) {
      expect((await l.peek(policy, 'k')).source, `k's ${policy} state is tracked again`).toBe('lease');
    }
    expect(l.stats().keys).toBe(4);
  });

  it('never evicts a key used within the last three quarters of maxKeys lookups, and stays bounded', async () => {
    const l = limiter({ store: new MemoryStore(), policies: { p: bucket(1e6, 1e9) }, maxKeys: 40 });
    // A hot key every 25 lookups (under 3/4 of 40) among a stream of fresh keys that fills the
    // table many times over. `peek` answers from the local state while it is held.
    let held = 0;
    for (let i = 0; i < 2000; i++) {
      const hot = i % 25 === 0;
      if (hot && i > 0) {
        expect((await l.peek('p', 'hot')).source, `the hot key is still held at lookup ${i}`).toBe('lease');
        held++;
      }
      await l.consume('p', hot ? 'hot' : `fresh-${i}`);
      expect(l.stats().keys).toBeLessThanOrEqual(40);
    }
    expect(held).toBe(79);
    expect(l.stats().keys, 'the table is full: fresh keys were evicted').toBe(40);
  });

  // One tail key in 3: evictions often, deferred refreshes made at each. One in 200: long runs of
  // hot keys between insertions, so the deferred refreshes outgrow the table and are compacted
  // (superseded ones dropped), and their slots are reused after each insertion made them.
  it.each([
    ['often', 3],
    ['rarely', 200],
  ])(
    'evicts exactly as an LRU refreshed at every due lookup would, though refreshes are deferred (tail keys %s)',
    async (_, tailEvery) => {
      const maxKeys = 8;
      const l = limiter({ store: new MemoryStore(), policies: { p: bucket(1e6, 1e9) }, maxKeys });
      // The model: recency refreshed at once, when more than maxKeys / 4 lookups came since the last
      // refresh; a lookup of the key looked up just before changes nothing.
      const order: string[] = []; // least recent first
      const refreshedAt = new Map<string, number>();
      let lookups = 0;
      let last: string | undefined;
      let seed = 7;
      for (let i = 0; i < 3000; i++) {
        seed = (seed * 1103515245 + 12345) % 2 ** 31;
        // A few hot keys and a churning tail, so that evictions and deferred refreshes interleave.
        const key = seed % tailEvery === 0 ? `tail-${(seed >> 4) % 20}` : `hot-${seed % 5}`;
        await l.consume('p', key);
        if (key === last) continue;
        last = key;
        lookups++;
        const at = order.indexOf(key);
        if (at < 0) {
          order.push(key);
          refreshedAt.set(key, lookups);
          if (order.length > maxKeys) refreshedAt.delete(order.shift()!);
        } else if (lookups - refreshedAt.get(key)! > Math.floor(maxKeys / 4)) {
          order.splice(at, 1);
          order.push(key);
          refreshedAt.set(key, lookups);
        }
      }
      const pool = [
        ...Array.from({ length: 5 }, (_, i) => `hot-${i}`),
        ...Array.from({ length: 20 }, (_, i) => `tail-${i}`),
      ];
      const held: string[] = [];
      for (const key of pool) if ((await l.peek('p', key)).source === 'lease') held.push(key);
      expect(held.sort()).toEqual([...order].sort());
    },
  );
});
