/**
 * Options a user can get wrong without a type checker (plain JS, a config file, a typo): each is a
 * typed error naming the field, never a silently ignored setting or a crash.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { rateLimit } from '../../src/http/index.js';
import {
  ArgumentError,
  ConfigError,
  Limiter,
  MemoryStore,
  RedisStore,
  TokenleaseError,
} from '../../src/index.js';
import { closeAllClients, redisClient, uniquePrefix } from '../support/clients.js';
import { thrown } from '../support/thrown.js';

afterAll(closeAllClients);

const rejection = (run: () => unknown) => thrown(TokenleaseError, run);

/** The typed error the promise of `run` rejects with; fails the test on anything else. */
async function rejectionOf(run: () => Promise<unknown>): Promise<TokenleaseError> {
  const outcome = await run().then(
    () => new Error('resolved: expected a TokenleaseError'),
    (err: unknown) => err,
  );
  if (outcome instanceof TokenleaseError) return outcome;
  throw outcome;
}
const bucket = { b: { algorithm: 'token-bucket', rate: 10 } } as const;

describe('a policy option the algorithm does not have is refused, naming it', () => {
  it.each([
    ['token-bucket', { algorithm: 'token-bucket', rate: 10, limit: 5 }, 'policies.p.limit'],
    ['token-bucket', { algorithm: 'token-bucket', rate: 10, window: '1m' }, 'policies.p.window'],
    [
      'token-bucket',
      { algorithm: 'token-bucket', rate: 10, lease: { maxFrac: 0.5 } },
      'policies.p.lease.maxFrac',
    ],
    ['fixed-window', { algorithm: 'fixed-window', limit: 5, window: '1m', burst: 9 }, 'policies.p.burst'],
    [
      'fixed-window',
      { algorithm: 'fixed-window', limit: 5, window: '1m', lease: { ahead: '1s' } },
      'policies.p.lease.ahead',
    ],
    ['sliding-window', { algorithm: 'sliding-window', limit: 5, window: '1m', rate: 5 }, 'policies.p.rate'],
    [
      'sliding-log',
      { algorithm: 'sliding-log', limit: 5, window: '1m', quantums: '1s' },
      'policies.p.quantums',
    ],
    ['leaky-bucket', { algorithm: 'leaky-bucket', rate: 5, max_wait: '2s' }, 'policies.p.max_wait'],
    ['concurrency', { algorithm: 'concurrency', limit: 5, ttl: '1m' }, 'policies.p.ttl'],
    [
      'concurrency',
      { algorithm: 'concurrency', limit: 5, lease: { writeBehind: false } },
      'policies.p.lease.writeBehind',
    ],
  ])('%s: %j', (_algorithm, policy, field) => {
    const err = rejection(() => new Limiter({ policies: { p: policy as never } }));
    expect(err).toBeInstanceOf(ConfigError);
    expect(err.field).toBe(field);
    expect(err.message, 'the message lists what the algorithm takes').toMatch(
      /unknown option; expected one of/,
    );
  });

  it("a concurrency policy's `fail` is refused: acquire() has no fail policy, so it would be silently ignored", () => {
    const err = rejection(
      () => new Limiter({ policies: { p: { algorithm: 'concurrency', limit: 5, fail: 'open' } as never } }),
    );
    expect(err).toBeInstanceOf(ConfigError);
    expect(err.field).toBe('policies.p.fail');
  });

  it('setPolicies refuses it too, and the old policy keeps running', async () => {
    const limiter = new Limiter({ policies: bucket, sweepIntervalMs: 0 });
    const err = rejection(() =>
      limiter.setPolicies({ b: { algorithm: 'token-bucket', rate: 10, brust: 20 } as never }),
    );
    expect(err.field).toBe('policies.b.brust');
    expect(limiter.describe('b').limit, 'the old policy still runs').toBe(10);
    await limiter.close();
  });

  it('every documented option is still accepted', async () => {
    const limiter = new Limiter({
      sweepIntervalMs: 0,
      policies: {
        tb: {
          algorithm: 'token-bucket',
          rate: 10,
          period: '1s',
          burst: 20,
          fail: 'open',
          lease: { maxFraction: 0.2, ahead: '1s', ttl: '2s', horizon: '100ms', writeBehind: false },
        },
        fw: {
          algorithm: 'fixed-window',
          limit: 5,
          window: '1m',
          anchor: 'first-hit',
          fail: 'closed',
          lease: { maxFraction: 0.2, ttl: '2s', horizon: '100ms', writeBehind: true },
        },
        sw: { algorithm: 'sliding-window', limit: 5, window: '1m', lease: 'exact', fail: 'local' },
        sl: { algorithm: 'sliding-log', limit: 5, window: '1m', quantum: '1s', lease: 'exact', fail: 'open' },
        lb: {
          algorithm: 'leaky-bucket',
          rate: 5,
          period: '1s',
          burst: 2,
          maxWait: '1s',
          lease: 'exact',
          fail: 'open',
        },
        cc: { algorithm: 'concurrency', limit: 5, slotTtl: '30s', lease: { maxFraction: 0.5, ttl: '1s' } },
      },
    });
    expect((await limiter.consume('tb', 'k')).allowed).toBe(true);
    await limiter.close();
  });
});

describe('a Limiter option it does not have is refused, naming it', () => {
  // Policies refused unknown options, the Limiter ignored them: a typo such as `maxkeys` or
  // `breaker.cooldown` left the default silently in force.
  it.each([
    [{ maxkeys: 10 }, 'maxkeys'],
    [{ sweepInterval: 100 }, 'sweepInterval'],
    [{ clock: () => 0 }, 'clock'],
    [{ breaker: { cooldown: '1s' } }, 'breaker.cooldown'],
    [{ offenders: { size: 10 } }, 'offenders.size'],
  ])('%j', (options, field) => {
    const err = rejection(() => new Limiter({ policies: bucket, ...(options as object) }));
    expect(err).toBeInstanceOf(ConfigError);
    expect(err.field).toBe(field);
    expect(err.message).toMatch(/unknown option; expected one of `/);
  });

  it.each([
    [{ offenders: [] }, 'offenders'],
    [{ breaker: [] }, 'breaker'],
  ])('a list where options go: %j', (options, field) => {
    // `typeof [] === 'object'`: a list read as options would run every default without a word.
    const err = rejection(() => new Limiter({ policies: bucket, ...(options as object) }));
    expect(err).toBeInstanceOf(ConfigError);
    expect(err.field).toBe(field);
  });

  it('every documented option is accepted', async () => {
    const limiter = new Limiter({
      store: new MemoryStore(),
      policies: bucket,
      now: () => 0,
      maxKeys: 10,
      concurrency: 2,
      sweepIntervalMs: 0,
      observers: [],
      offenders: { capacity: 8, halfLife: '1s' },
      expectedInstances: 2,
      closeTimeoutMs: 100,
      breaker: { failures: 2, coolDown: '100ms' },
    });
    expect((await limiter.consume('b', 'k')).allowed).toBe(true);
    await limiter.close();
  });
});

describe('offenders.capacity has an upper bound', () => {
  // The sketch keeps up to `capacity` denied keys per policy: 1e300 accepted meant every distinct
  // denied key (an attacker's random ones) was kept, so its memory had no bound at all.
  it.each([100_001, 1e300, 2 ** 53])('%d is a ConfigError naming the field and the range', (capacity) => {
    const err = rejection(() => new Limiter({ policies: bucket, offenders: { capacity } }));
    expect(err).toBeInstanceOf(ConfigError);
    expect(err.field).toBe('offenders.capacity');
    expect(err.message).toMatch(/from 1 to 100000/);
  });

  it('100 000 is accepted', async () => {
    const limiter = new Limiter({ policies: bucket, offenders: { capacity: 100_000 } });
    await limiter.close();
  });
});

describe('maxKeys has an upper bound', () => {
  // The local table preallocates its index for maxKeys entries: 1e8 took 3.2 GB and 79 s to
  // construct, 1e9 killed Node, 2^32 threw a RangeError from inside lru-cache.
  it.each([1e9, 2 ** 32, 1e12])('maxKeys %s is a ConfigError naming the field and the range', (maxKeys) => {
    const err = rejection(() => new Limiter({ policies: bucket, maxKeys }));
    expect(err).toBeInstanceOf(ConfigError);
    expect(err.field).toBe('maxKeys');
    expect(err.message).toMatch(/from 1 to 10000000/);
  });
});

describe('options objects of acquire, reserve and wait', () => {
  const policies = {
    slots: { algorithm: 'concurrency', limit: 3 },
    shaper: { algorithm: 'leaky-bucket', rate: 10, burst: 3 },
  } as const;

  it.each([null, 2, 'x'])(
    'acquire(policy, key, %j) is an ArgumentError naming `options`, and takes no slot',
    async (options) => {
      const client = redisClient();
      const store = new RedisStore({ client, prefix: uniquePrefix('strict-acquire'), timeoutMs: 2000 });
      const limiter = new Limiter({ store, policies, sweepIntervalMs: 0 });
      const err = await rejectionOf(() => limiter.acquire('slots', 'k', options as never));
      expect(err).toBeInstanceOf(ArgumentError);
      expect(err.field).toBe('options');
      const held = [];
      for (let i = 0; i < 3; i++) held.push(await limiter.acquire('slots', 'k'));
      expect(
        held.map((h) => h.allowed),
        'all three slots are still free',
      ).toEqual([true, true, true]);
      for (const h of held) await h.release();
      await limiter.close();
      await store.close();
    },
  );

  it.each([null, 5])(
    'reserve and wait with options %j are ArgumentErrors naming `options`',
    async (options) => {
      const limiter = new Limiter({ policies, sweepIntervalMs: 0 });
      for (const call of [
        () => limiter.reserve('shaper', 'k', 1, options as never),
        () => limiter.wait('shaper', 'k', 1, options as never),
      ]) {
        const err = await rejectionOf(call);
        expect(err).toBeInstanceOf(ArgumentError);
        expect(err.field).toBe('options');
      }
      await limiter.close();
    },
  );

  // A typo in a call's options (`maxWait` for `maxWaitMs`, `costs` for `cost`) left the default in
  // force: wait() waited up to the policy's maxWait, acquire() took one slot.
  it('an option the call does not have is an ArgumentError naming it, and nothing is taken', async () => {
    const limiter = new Limiter({ policies, sweepIntervalMs: 0 });
    for (const [call, field] of [
      [() => limiter.acquire('slots', 'k', { costs: 2 } as never), 'options.costs'],
      [() => limiter.reserve('shaper', 'k', 1, { maxWait: 10 } as never), 'options.maxWait'],
      [
        () => limiter.reserve('shaper', 'k', 1, { signal: AbortSignal.timeout(10) } as never),
        'options.signal',
      ],
      [() => limiter.wait('shaper', 'k', 1, { maxWait: 10 } as never), 'options.maxWait'],
    ] as const) {
      const err = await rejectionOf(call);
      expect(err).toBeInstanceOf(ArgumentError);
      expect(err.field).toBe(field);
      expect(err.message).toMatch(/unknown option; expected one of `/);
    }
    expect((await limiter.peek('shaper', 'k')).remaining, 'the drain is untouched').toBe(3);
    const d = await limiter.wait('shaper', 'k', 1, { maxWaitMs: 0, signal: AbortSignal.timeout(1000) });
    expect(d.allowed).toBe(true);
    await limiter.close();
  });
});

describe('clocks and header names', () => {
  it.each([5, 'now'])(
    'MemoryStore({ now: %j }) is a ConfigError naming `now` (it threw a TypeError at the first decision)',
    (now) => {
      const err = rejection(() => new MemoryStore({ now: now as never }));
      expect(err).toBeInstanceOf(ConfigError);
      expect(err.field).toBe('now');
    },
  );

  it.each([5, '', 'x api key'])(
    'apiKeyHeader %j is a ConfigError naming it (5 threw a TypeError)',
    async (apiKeyHeader) => {
      const limiter = new Limiter({ policies: bucket, sweepIntervalMs: 0 });
      const err = rejection(() =>
        rateLimit({ limiter, rules: [{ policy: 'b', by: 'apiKey' }], apiKeyHeader: apiKeyHeader as never }),
      );
      expect(err).toBeInstanceOf(ConfigError);
      expect(err.field).toBe('apiKeyHeader');
      await limiter.close();
    },
  );
});

describe('store options', () => {
  it.each([
    [{ timeout: 5 }, 'timeout'],
    [{ batch: { maxItem: 1 } }, 'batch.maxItem'],
    [{ batch: [] }, 'batch'],
    [{ slotGroup: 4 }, 'slotGroup'],
  ])('RedisStore(%j) is a ConfigError naming %s (it was ignored: timeoutMs stayed 50)', (extra, field) => {
    const err = rejection(() => new RedisStore({ client: redisClient(), ...(extra as object) }));
    expect(err).toBeInstanceOf(ConfigError);
    expect(err.field).toBe(field);
  });

  it.each([
    [{ nowe: () => 0 }, 'nowe'],
    [null, 'options'],
    [[], 'options'],
  ])('MemoryStore(%j) is a ConfigError naming %s', (options, field) => {
    const err = rejection(() => new MemoryStore(options as never));
    expect(err).toBeInstanceOf(ConfigError);
    expect(err.field).toBe(field);
  });
});

describe('rateLimit options (node:http)', () => {
  it('a misspelt option is a ConfigError naming it (trustproxy was ignored: no proxy was trusted)', async () => {
    const limiter = new Limiter({ policies: { 'per-client': { algorithm: 'token-bucket', rate: 10 } } });
    const err = rejection(() =>
      rateLimit({ limiter, rules: [{ policy: 'per-client' }], trustproxy: true } as never),
    );
    expect(err).toBeInstanceOf(ConfigError);
    expect(err.field).toBe('trustproxy');
    await limiter.close();
  });
});

describe('rateLimit options of the wrong type (all adapters share the core)', () => {
  it.each([
    ['legacyHeaders', 'yes'],
    ['passOnStoreError', 1],
    ['keyGenerator', 'ip'],
    ['skip', true],
    ['user', 'id'],
    ['onExceeding', {}],
    ['onExceeded', 'log'],
    ['onShadowExceeded', 1],
    ['onError', 'warn'],
    ['message', 5],
    ['message', { error: 'slow down' }],
  ])(
    '%s: %o is a ConfigError naming it, at creation (it failed or was ignored on every request)',
    async (field, value) => {
      const limiter = new Limiter({ policies: { 'per-client': { algorithm: 'token-bucket', rate: 10 } } });
      const err = rejection(() =>
        rateLimit({ limiter, rules: [{ policy: 'per-client' }], [field]: value } as never),
      );
      expect(err).toBeInstanceOf(ConfigError);
      expect(err.field).toBe(field);
      await limiter.close();
    },
  );
});
