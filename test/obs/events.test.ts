import { describe, expect, it, vi } from 'vitest';
import {
  ArgumentError,
  ConfigError,
  type DecisionEvent,
  decisionLog,
  type LeaseEvent,
  Limiter,
  type Observer,
  type PolicyConfig,
  type StoreCallEvent,
} from '../../src/index.js';
import { closedAfterEach } from '../support/closedAfterEach.js';

const exact: PolicyConfig = { algorithm: 'token-bucket', rate: 10, burst: 10, lease: 'exact' };
const leased: PolicyConfig = { algorithm: 'token-bucket', rate: 100, burst: 100 };

const open = closedAfterEach();

function setup(options: Partial<ConstructorParameters<typeof Limiter>[0]> = {}) {
  let t = 1_000_000;
  const now = () => t;
  const decisions: DecisionEvent[] = [];
  const leases: LeaseEvent[] = [];
  const storeCalls: StoreCallEvent[] = [];
  const recorder: Observer = {
    decision: (e) => decisions.push(e),
    lease: (e) => leases.push(e),
    storeCall: (e) => storeCalls.push(e),
  };
  const limiter = new Limiter({
    policies: { exact, leased },
    now,
    sweepIntervalMs: 0,
    observers: [recorder],
    ...options,
  });
  open.push(limiter);
  return { limiter, decisions, leases, storeCalls, advance: (ms: number) => (t += ms) };
}

/** Background work done: two event-loop turns (an orphaned lease goes back one turn after it lands). */
const settle = async () => {
  for (let i = 0; i < 2; i++) await new Promise((resolve) => setImmediate(resolve));
};

describe('observer events', () => {
  it('reports each decision with policy, key, route, cost, outcome, source and reason', async () => {
    const { limiter, decisions } = setup();
    await limiter.consume('exact', 'k', 9);
    await limiter.consume('exact', 'k', 5);
    await limiter.consume('exact', 'k', 5);
    await limiter.consume('exact', 'k', 50);
    const base = { policy: 'exact', key: 'k', route: undefined, limit: 10 };
    expect(decisions).toEqual([
      {
        ...base,
        cost: 9,
        outcome: 'allowed',
        source: 'store',
        reason: undefined,
        remaining: 1,
        retryAfterMs: 0,
      },
      {
        ...base,
        cost: 5,
        outcome: 'denied',
        source: 'store',
        reason: 'limit',
        remaining: 1,
        retryAfterMs: 400,
      },
      {
        ...base,
        cost: 5,
        outcome: 'denied',
        source: 'lease',
        reason: 'limit',
        remaining: 1,
        retryAfterMs: 400,
      },
      {
        ...base,
        cost: 50,
        outcome: 'denied',
        source: 'lease',
        reason: 'cost-above-limit',
        remaining: 1,
        retryAfterMs: Number.POSITIVE_INFINITY,
      },
    ]);
  });

  it('reports one event per rule of a multi-rule check, each with the route', async () => {
    const { limiter, decisions } = setup();
    const d = await limiter.consume([
      { policy: 'exact', key: 'user-1', cost: 11, route: 'GET /search' },
      { policy: 'leased', key: 'ip-1', route: 'GET /search' },
    ]);
    expect(d.allowed).toBe(false);
    expect(
      decisions
        .map((e) => [e.policy, e.key, e.route, e.outcome])
        .sort((a, b) => String(a[0]).localeCompare(String(b[0]))),
    ).toEqual([
      ['exact', 'user-1', 'GET /search', 'denied'],
      // Allowed by its own rule; the check as a whole was refused and its token refunded.
      ['leased', 'ip-1', 'GET /search', 'allowed'],
    ]);
  });

  it('reports leases granted, and returned on expiry, eviction and close, with token counts', async () => {
    const { limiter, leases, advance } = setup({ maxKeys: 2 });
    // Two requests: a key seen once is not worth fetching ahead for.
    const twice = async (key: string) => {
      await limiter.consume('leased', key);
      await limiter.consume('leased', key);
      await settle();
    };
    await twice('a');
    expect(leases).toEqual([
      { kind: 'granted', policy: 'leased', key: 'a', tokens: 1 },
      { kind: 'granted', policy: 'leased', key: 'a', tokens: 1 },
      { kind: 'granted', policy: 'leased', key: 'a', tokens: 1 }, // refill ahead
    ]);
    leases.length = 0;
    advance(3000);
    limiter.sweep();
    expect(leases).toEqual([{ kind: 'returned', policy: 'leased', key: 'a', tokens: 1, reason: 'expired' }]);

    leases.length = 0;
    await twice('b');
    await twice('c');
    await twice('d'); // a third key: 'b', least recently used, is evicted
    expect(leases.filter((e) => e.kind === 'returned')).toEqual([
      { kind: 'returned', policy: 'leased', key: 'b', tokens: 1, reason: 'evicted' },
    ]);

    leases.length = 0;
    await limiter.close();
    expect(leases.map((e) => `${e.kind}:${e.key}:${e.kind === 'returned' ? e.reason : ''}`).sort()).toEqual([
      'returned:c:closed',
      'returned:d:closed',
    ]);
  });

  it('reports a check marked shadow that would be denied as shadow-denied', async () => {
    const { limiter, decisions } = setup();
    await limiter.consume([{ policy: 'exact', key: 'k', cost: 11, shadow: true }]);
    await limiter.consume([{ policy: 'exact', key: 'k', cost: 5, shadow: true }]);
    expect(decisions.map((e) => [e.outcome, e.reason])).toEqual([
      ['shadow-denied', 'cost-above-limit'],
      ['allowed', undefined],
    ]);
    expect(limiter.topDenied('exact')).toEqual([{ key: 'k', count: 1, error: 0 }]);
    expect(limiter.stats().outcomes['shadow-denied']).toBe(1);
  });

  it('reports leases handed back because setPolicies changed their policy as reconfigured', async () => {
    const { limiter, leases } = setup();
    await limiter.consume('leased', 'a');
    await limiter.consume('leased', 'a');
    await settle();
    leases.length = 0;
    limiter.setPolicies({ exact, leased: { ...leased, rate: 50 } });
    expect(leases).toEqual([
      { kind: 'returned', policy: 'leased', key: 'a', tokens: 1, reason: 'reconfigured' },
    ]);
  });

  it('keeps top offenders for a policy added by setPolicies', async () => {
    const { limiter } = setup();
    limiter.setPolicies({ exact, added: exact });
    await limiter.consume('added', 'k', 11);
    expect(limiter.topDenied('added')).toEqual([{ key: 'k', count: 1, error: 0 }]);
  });

  it('serves the requests waiting on a lease that lands after its key was evicted, then hands the rest back as orphaned', async () => {
    const { limiter, leases } = setup({ maxKeys: 1 });
    // Both miss at once: 'b' evicts 'a' while a's store call is in flight.
    const [a, b] = await Promise.all([limiter.consume('leased', 'a', 0.5), limiter.consume('leased', 'b')]);
    await settle();
    expect([a.allowed, b.allowed], 'each request served by its own lease').toEqual([true, true]);
    expect(limiter.stats().storeCalls, 'one acquisition each and the hand-back, nothing fetched again').toBe(
      3,
    );
    const orphaned = leases.filter((e) => e.kind === 'returned' && e.reason === 'orphaned');
    expect(orphaned, 'what the waiting request left of the lease').toMatchObject([{ key: 'a', tokens: 0.5 }]);
  });

  it('times every store call under its operation name', async () => {
    const { limiter, storeCalls } = setup();
    await limiter.consume('exact', 'k');
    expect(storeCalls).toHaveLength(1);
    expect(storeCalls[0]).toMatchObject({ op: 'token_bucket_acquire', errorCode: undefined });
    expect(storeCalls[0]!.seconds).toBeGreaterThanOrEqual(0);
  });

  it('keeps answering when an observer throws, and warns once', async () => {
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => {});
    try {
      const { limiter } = setup({
        observers: [
          {
            decision() {
              throw new Error('broken dashboard');
            },
          },
        ],
      });
      for (let i = 0; i < 3; i++) expect((await limiter.consume('exact', 'k')).allowed).toBe(true);
      expect(warn).toHaveBeenCalledTimes(1);
      expect(String(warn.mock.calls[0]?.[0])).toContain('broken dashboard');
    } finally {
      warn.mockRestore();
    }
  });

  it('rejects bad observers, offenders and routes naming the field', async () => {
    const policies = { exact };
    expect(() => new Limiter({ policies, observers: {} as never })).toThrow(ConfigError);
    expect(() => new Limiter({ policies, observers: [null as never] })).toThrow(/`observers\[0\]`/);
    expect(() => new Limiter({ policies, offenders: { capacity: 0 } })).toThrow(/`offenders.capacity`/);
    expect(() => new Limiter({ policies, offenders: { halfLife: 'soon' as never } })).toThrow(
      /`offenders.halfLife`/,
    );
    const { limiter } = setup();
    await expect(limiter.consume([{ policy: 'exact', key: 'k', route: 42 as never }])).rejects.toThrow(
      /`checks\[0\].route`/,
    );
  });
});

describe('topDenied', () => {
  it("names the most denied keys of a policy, heaviest first, from the limiter's own decisions", async () => {
    const { limiter } = setup();
    // Each request costs the whole burst: a key's first one passes, the rest are denied.
    const asks = Array.from({ length: 20 }, (_, i) => 1 + 3 * (20 - i));
    for (const [i, n] of asks.entries()) {
      for (let j = 0; j < n; j++) await limiter.consume('exact', `client-${i}`, 10);
    }
    expect(limiter.topDenied('exact', 3)).toEqual([
      { key: 'client-0', count: 60, error: 0 },
      { key: 'client-1', count: 57, error: 0 },
      { key: 'client-2', count: 54, error: 0 },
    ]);
    expect(limiter.topDenied('leased')).toEqual([]);
    expect(limiter.stats().outcomes.denied).toBe(asks.reduce((a, b) => a + b - 1, 0));
  });

  it('finds the true top offenders of a Zipf flood of requests through the limiter', async () => {
    const { limiter } = setup({
      policies: { tight: { algorithm: 'token-bucket', rate: 1, period: '1d', burst: 1 } },
    });
    let seed = 42;
    const random = () => {
      seed = (Math.imul(seed, 1_103_515_245) + 12_345) >>> 0;
      return seed / 2 ** 32;
    };
    const keys = 20_000;
    const weights = Array.from({ length: keys }, (_, i) => 1 / (i + 1));
    const cdf: number[] = [];
    weights.reduce((acc, w, i) => (cdf[i] = acc + w), 0);
    const sum = cdf[keys - 1]!;
    const requests = new Map<string, number>();
    for (let i = 0; i < 30_000; i++) {
      const u = random() * sum;
      let lo = 0;
      let hi = keys - 1;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (cdf[mid]! < u) lo = mid + 1;
        else hi = mid;
      }
      const key = `k${(lo * 7919) % keys}`;
      requests.set(key, (requests.get(key) ?? 0) + 1);
      await limiter.consume('tight', key);
    }
    // Each key's first request takes its one token; every later one is denied.
    const trueTop = [...requests].map(([k, n]) => [k, n - 1] as const).sort((a, b) => b[1] - a[1]);
    expect(limiter.topDenied('tight', 5).map((h) => [h.key, h.count])).toEqual(trueTop.slice(0, 5));
  });

  it('forgets old offenders with the half-life, and can be turned off', async () => {
    const { limiter, advance } = setup({ offenders: { halfLife: '10s' } });
    for (let j = 0; j < 41; j++) await limiter.consume('exact', 'old', 10);
    advance(20_000);
    for (let j = 0; j < 21; j++) await limiter.consume('exact', 'new', 10);
    expect(limiter.topDenied('exact', 2).map((h) => [h.key, h.count])).toEqual([
      ['new', 20],
      ['old', 10],
    ]);
    const off = setup({ offenders: false }).limiter;
    await off.consume('exact', 'k', 11);
    expect(off.topDenied('exact')).toEqual([]);
  });

  it('rejects an unknown policy or a bad n', () => {
    const { limiter } = setup();
    expect(() => limiter.topDenied('nope')).toThrow(ArgumentError);
    expect(() => limiter.topDenied('exact', -1)).toThrow(/`n`/);
  });
});

describe('decisionLog', () => {
  it('logs denials as structured records: key, route, cost, remaining, reason', async () => {
    const records: DecisionEvent[] = [];
    const { limiter } = setup({ observers: [decisionLog({ log: (r) => records.push(r) })] });
    await limiter.consume([{ policy: 'exact', key: 'k', cost: 8, route: 'POST /orders' }]);
    await limiter.consume([{ policy: 'exact', key: 'k', cost: 8, route: 'POST /orders' }]);
    expect(records).toHaveLength(1);
    expect(records[0]).toMatchObject({
      key: 'k',
      route: 'POST /orders',
      cost: 8,
      remaining: 2,
      reason: 'limit',
      outcome: 'denied',
    });
  });

  it("logs every decision at level 'all' and rejects bad options", async () => {
    const records: DecisionEvent[] = [];
    const { limiter } = setup({ observers: [decisionLog({ log: (r) => records.push(r), level: 'all' })] });
    await limiter.consume('exact', 'k');
    expect(records.map((r) => r.outcome)).toEqual(['allowed']);
    expect(() => decisionLog({ log: 'console' as never })).toThrow(/`log`/);
    expect(() => decisionLog({ log: () => {}, level: 'debug' as never })).toThrow(/`level`/);
  });
});
