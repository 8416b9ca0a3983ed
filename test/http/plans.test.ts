import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Plans, type PlansChange, PlansError } from '../../src/http/index.js';
import { Limiter, MemoryStore } from '../../src/index.js';
import { ADAPTERS, parseRateLimit, type Running, startServer, virtualClock } from './servers.js';

let cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const fn of cleanup.reverse()) await fn();
  cleanup = [];
});

function tempFile(name: string, text: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'tokenlease-plans-'));
  cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

const PLANS = (perKeyBurst: number) => `# tariffs
defaultPlan: anonymous
plans:
  anonymous:
    rules:
      per-client: { rate: 1, period: 1m, burst: 1 }
  pro:
    rules:
      per-key: { rate: ${perKeyBurst}, period: 1s, burst: ${perKeyBurst} }
      daily: { rate: 1000, period: 1d, weighted: false }
keys:
  k_pro: pro
  k_monitor: pro
costs:
  "POST /reports": 2
allow: [k_monitor]
deny: [k_leaked, 192.0.2.0/24]
`;

describe('plans file validation', () => {
  const error = (text: string, source = 'plans.yaml') => {
    try {
      Plans.parse(text, source);
    } catch (err) {
      expect(err).toBeInstanceOf(PlansError);
      return (err as PlansError).message;
    }
    throw new Error('expected a PlansError');
  };

  it.each([
    [
      'a bad rate names the field and the line of the value',
      'plans:\n  pro:\n    rules:\n      per-key: { rate: -5 }\n',
      'plans.yaml:4:24: Invalid `plans.pro.rules.per-key.rate`: expected a positive finite number, got -5',
    ],
    [
      'a misspelt field points at the key',
      'plans:\n  pro:\n    rules:\n      per-key:\n        rate: 5\n        burts: 10\n',
      'plans.yaml:6:9: Invalid `plans.pro.rules.per-key.burts`: unknown field; expected one of `algorithm`, `rate`, `period`, `burst`, `lease`, `fail`, `by`, `routes`, `weighted`, `shadow`, `enforce`',
    ],
    [
      "a misspelt field of another algorithm points at the key and lists that algorithm's fields",
      'rules:\n  daily: { algorithm: fixed-window, limit: 5, window: 1d, burst: 10 }\n',
      'plans.yaml:2:59: Invalid `rules.daily.burst`: unknown field; expected one of `algorithm`, `limit`, `window`, `anchor`, `lease`, `fail`, `by`, `routes`, `weighted`, `shadow`, `enforce`',
    ],
    [
      'an unparseable period',
      'rules:\n  per-ip: { rate: 5, period: 1 week, by: ip }\n',
      "plans.yaml:2:30: Invalid `rules.per-ip.period`: expected a duration like '250ms', '1s', '1m', '1h' or '1d', got \"1 week\"",
    ],
    [
      'a key mapped to a plan that does not exist',
      'plans:\n  pro: { rules: { r: { rate: 1 } } }\nkeys:\n  k_1: pro\n  k_2: prof\n',
      'plans.yaml:5:8: Invalid `keys.k_2`: unknown plan "prof"; known plans: "pro"',
    ],
    [
      'an unknown key part',
      'rules:\n  r: { rate: 1, by: [ip, tenant] }\n',
      "plans.yaml:2:26: Invalid `rules.r.by[1]`: expected one of 'client', 'apiKey', 'user', 'ip', 'route', 'global' or a function, got \"tenant\"",
    ],
    [
      'a bad CIDR in the deny list',
      'rules:\n  r: { rate: 1 }\ndeny: [k_1, 10.0.0.0/99]\n',
      'plans.yaml:3:13: Invalid `deny[1]`: expected an IP address or CIDR range, got "10.0.0.0/99"',
    ],
    [
      'a duplicated key (YAML syntax)',
      'rules:\n  r: { rate: 1 }\n  r: { rate: 2 }\n',
      'plans.yaml:3:3: Map keys must be unique (DUPLICATE_KEY)',
    ],
    [
      'a percentage out of range',
      'rules:\n  r: { rate: 1, enforce: 150 }\n',
      'plans.yaml:2:26: Invalid `rules.r.enforce`: expected a percentage from 0 to 100, got 150',
    ],
    [
      'a file without rules',
      'keys: {}\n',
      'plans.yaml:1:1: Invalid `(file)`: expected at least one rule under `rules` or `plans.<plan>.rules`',
    ],
  ])('%s', (_name, text, message) => {
    expect(error(text)).toBe(message);
  });

  it('a rule takes every policy field, fail included', () => {
    const plans = Plans.parse(
      'rules:\n  per-ip: { rate: 5, period: 1s, fail: open, by: ip }\n  daily: { algorithm: fixed-window, limit: 5, window: 1d, fail: closed }\n',
      'plans.yaml',
    );
    expect(plans.policies['*/per-ip']).toMatchObject({ algorithm: 'token-bucket', fail: 'open' });
    expect(plans.policies['*/daily']).toMatchObject({ algorithm: 'fixed-window', fail: 'closed' });
  });

  it('reports lines in JSON files too', () => {
    const json =
      '{\n  "plans": {\n    "pro": {\n      "rules": { "per-key": { "rate": 0 } }\n    }\n  }\n}\n';
    expect(error(json, 'plans.json')).toBe(
      'plans.json:4:39: Invalid `plans.pro.rules.per-key.rate`: expected a positive finite number, got 0',
    );
  });

  it('reloads by polling where file events are unavailable', async () => {
    const path = tempFile('plans.json', JSON.stringify({ rules: { r: { rate: 1 } } }));
    const plans = Plans.fromFile(path);
    const limiter = new Limiter({ policies: plans.policies, sweepIntervalMs: 0 });
    cleanup.push(
      () => limiter.close(),
      () => plans.close(),
    );
    const reloaded = new Promise<PlansChange>((resolve) => {
      plans.watch({ limiter, pollIntervalMs: 20, debounceMs: 0, onReload: resolve });
    });
    // The poller compares against its first stat, taken asynchronously: change the file after it.
    await new Promise((resolve) => setTimeout(resolve, 200));
    writeFileSync(path, JSON.stringify({ rules: { r: { rate: 7 } } }));
    expect(await reloaded).toEqual({ added: [], changed: ['*/r'], removed: [] });
    expect(limiter.describe('*/r').limit).toBe(7);
  });

  it('compiles policies named <plan>/<rule> and */<rule>', () => {
    const plans = Plans.parse(`${PLANS(5)}rules:\n  per-ip: { rate: 50, by: ip }\n`);
    expect(Object.keys(plans.policies).sort()).toEqual([
      '*/per-ip',
      'anonymous/per-client',
      'pro/daily',
      'pro/per-key',
    ]);
    expect(plans.policies['pro/per-key']).toEqual({
      algorithm: 'token-bucket',
      rate: 5,
      period: '1s',
      burst: 5,
    });
  });
});

describe('Limiter: setPolicies, describe, per-rule decisions', () => {
  const bucket = (rate: number) => ({ algorithm: 'token-bucket' as const, rate, period: '1s' as const });

  it('keeps the leases of unchanged policies and hands back those of changed and removed ones', async () => {
    const clock = virtualClock();
    const limiter = new Limiter({
      store: new MemoryStore({ now: clock.now }),
      policies: { keep: bucket(100), change: bucket(100), drop: bucket(100) },
      now: clock.now,
      sweepIntervalMs: 0,
    });
    cleanup.push(() => limiter.close());
    // Enough demand that each policy holds a lease of several tokens.
    for (let i = 0; i < 20; i++) {
      await limiter.consume([
        { policy: 'keep', key: 'k' },
        { policy: 'change', key: 'k' },
        { policy: 'drop', key: 'k' },
      ]);
    }
    await new Promise((resolve) => setImmediate(resolve)); // refill-ahead leases still in flight land
    const before = limiter.stats();
    limiter.setPolicies({ keep: bucket(100), change: bucket(100), drop: bucket(100) });
    await new Promise((resolve) => setImmediate(resolve));
    expect(limiter.stats(), 'the same policies again: nothing handed back, nothing dropped').toEqual(before);
    limiter.setPolicies({ keep: bucket(100), change: bucket(50) });
    await new Promise((resolve) => setImmediate(resolve));
    const after = limiter.stats();
    expect(after.tokensReturned, 'change and drop handed their unused tokens back').toBeGreaterThan(
      before.tokensReturned,
    );
    expect(after.keys, 'only the unchanged entry is still tracked').toBe(1);
    expect((await limiter.consume('keep', 'k')).allowed).toBe(true);
    expect(limiter.stats().localDecisions, 'the kept lease answers locally').toBe(after.localDecisions + 1);
    expect(limiter.describe('change')).toEqual({ limit: 50, windowSeconds: 1 });
    await expect(limiter.consume('drop', 'k')).rejects.toThrow(/unknown policy "drop"/);
  });

  it('a multi-rule decision carries each rule, the refunded ones as they stand after the refund', async () => {
    const clock = virtualClock();
    const limiter = new Limiter({
      policies: { fast: bucket(10), slow: { algorithm: 'token-bucket', rate: 1, period: '1m', burst: 1 } },
      now: clock.now,
      sweepIntervalMs: 0,
    });
    cleanup.push(() => limiter.close());
    const checks = [
      { policy: 'fast', key: 'k', cost: 2 },
      { policy: 'slow', key: 'k' },
    ];
    const first = await limiter.consume(checks);
    expect(first.checks?.map((d) => [d.policy, d.allowed, d.remaining])).toEqual([
      ['fast', true, 8],
      ['slow', true, 0],
    ]);
    const second = await limiter.consume(checks);
    expect(second).toMatchObject({ allowed: false, policy: 'slow', retryAfterMs: 60_000 });
    expect(second.checks?.map((d) => [d.policy, d.allowed, d.remaining, d.resetMs])).toEqual([
      ['fast', true, 8, 200],
      ['slow', false, 0, 60_000],
    ]);
  });

  it('rejects an invalid set eagerly and keeps the old one', async () => {
    const limiter = new Limiter({ policies: { p: bucket(10) }, sweepIntervalMs: 0 });
    cleanup.push(() => limiter.close());
    expect(() => limiter.setPolicies({ p: { algorithm: 'token-bucket', rate: -1 } })).toThrow(
      'Invalid `policies.p.rate`: expected a positive finite number, got -1',
    );
    expect(limiter.describe('p')).toEqual({ limit: 10, windowSeconds: 1 });
  });
});

describe.each(ADAPTERS)('plans from a file (%s)', (adapter) => {
  async function setup(text: string) {
    const clock = virtualClock();
    const path = tempFile('plans.yaml', text);
    const plans = Plans.fromFile(path);
    const limiter = new Limiter({
      store: new MemoryStore({ now: clock.now }),
      policies: plans.policies,
      now: clock.now,
      sweepIntervalMs: 0,
    });
    const reloads: PlansChange[] = [];
    const errors: PlansError[] = [];
    const waiters: (() => void)[] = [];
    const wake = () => {
      for (const w of waiters.splice(0)) w();
    };
    plans.watch({
      limiter,
      debounceMs: 20,
      onReload: (change) => {
        reloads.push(change);
        wake();
      },
      onError: (err) => {
        errors.push(err);
        wake();
      },
    });
    const server: Running = await startServer(adapter, { limiter, plans, now: clock.now });
    cleanup.push(
      () => plans.close(),
      () => limiter.close(),
      () => server.close(),
    );
    /** Rewrites the file and waits until the watcher has reloaded it or reported it. */
    const rewrite = async (next: string) => {
      const settled = new Promise<void>((resolve) => waiters.push(resolve));
      writeFileSync(path, next);
      await settled;
    };
    const get = (key?: string, path = '/profile') =>
      fetch(`${server.url}${path}`, { headers: key ? { 'x-api-key': key } : {} });
    return { clock, server, plans, reloads, errors, rewrite, get };
  }

  it('applies plans per API key, counts unknown keys as the default plan by IP, and honours allow/deny lists', async () => {
    const { get } = await setup(PLANS(3));
    const pro = await get('k_pro');
    expect(pro.headers.get('ratelimit-policy')).toBe('"per-key";q=3;w=1, "daily";q=1000;w=86400');
    expect(((await pro.json()) as { rateLimit: { plan: string } }).rateLimit.plan).toBe('pro');
    expect((await get('k_made_up')).status, 'unknown key: anonymous plan, first request').toBe(200);
    expect((await get('k_other_made_up')).status, 'another made-up key shares the IP bucket').toBe(429);
    const monitor = await get('k_monitor');
    expect(monitor.status).toBe(200);
    expect(monitor.headers.get('ratelimit'), 'allow-listed: not counted').toBeNull();
    const leaked = await get('k_leaked');
    expect(leaked.status).toBe(403);
    expect(await leaked.json()).toEqual({
      error: 'forbidden',
      message: 'This client is not allowed to use this API.',
    });
  });

  it('changes limits live when the file changes, and keeps the old config when the new file is broken', async () => {
    const { clock, get, rewrite, reloads, errors } = await setup(PLANS(2));
    expect((await get('k_pro')).status).toBe(200);
    expect((await get('k_pro')).status).toBe(200);
    expect((await get('k_pro')).status, 'burst 2 used up').toBe(429);

    await rewrite(PLANS(10));
    expect(reloads).toEqual([{ added: [], changed: ['pro/per-key'], removed: [] }]);
    clock.advance(1000); // 10 tokens at the new rate, 2 at the old one
    const statuses: number[] = [];
    for (let i = 0; i < 10; i++) statuses.push((await get('k_pro')).status);
    expect(statuses, 'the new limit admits 10').toEqual(Array(10).fill(200));
    const after = await get('k_pro');
    expect(after.status).toBe(429);
    expect(after.headers.get('ratelimit-policy')).toContain('"per-key";q=10;w=1');

    await rewrite(PLANS(10).replace('rate: 10,', 'rate: -10,'));
    expect(errors).toHaveLength(1);
    expect(errors[0]?.line).toBe(9);
    expect(errors[0]?.message).toMatch(
      /plans\.yaml:9:\d+: Invalid `plans\.pro\.rules\.per-key\.rate`: expected a positive finite number, got -10$/,
    );
    clock.advance(1000);
    const still = await get('k_pro');
    expect(still.status, 'old config still running').toBe(200);
    expect(still.headers.get('ratelimit-policy')).toContain('"per-key";q=10;w=1');
    expect(parseRateLimit(still.headers.get('ratelimit'))[0]?.r).toBe(9);
  });
});
