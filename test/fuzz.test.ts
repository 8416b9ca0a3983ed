import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import {
  type Decision,
  Limiter,
  MemoryStore,
  RedisStore,
  type Store,
  TokenleaseError,
} from '../src/index.js';
import { closeAllClients, redisClient, uniquePrefix } from './support/clients.js';
import { FaultyStore } from './support/faultyStore.js';

afterAll(closeAllClients);

/** Positive numbers, including the extremes that validation lets through. */
const positive = fc.oneof(
  { weight: 6, arbitrary: fc.integer({ min: 1, max: 1000 }) },
  { weight: 3, arbitrary: fc.double({ min: 1e-3, max: 1e6, noNaN: true }) },
  { weight: 1, arbitrary: fc.constantFrom(Number.MIN_VALUE, 1e-300, 1e-9, 1e300, Number.MAX_VALUE) },
);
/** Numbers (and other values) a caller might pass, sane and not. */
const anyNumber = fc.oneof(
  { weight: 8, arbitrary: positive },
  {
    weight: 2,
    arbitrary: fc.constantFrom(0, -1, Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY),
  },
  { weight: 1, arbitrary: fc.constantFrom('10', null, {}, true) },
);

const validDuration = fc.oneof(fc.constantFrom('250ms', '1s', '1m', '1h', '1d', '0.5s'), positive);
const duration = fc.oneof({ weight: 4, arbitrary: validDuration }, fc.constantFrom('soon', '', '1w', -1));

const validTokenBucket = fc.record(
  {
    algorithm: fc.constant('token-bucket'),
    rate: positive,
    period: validDuration,
    burst: positive,
    lease: fc.oneof(
      fc.constant('exact'),
      fc.record(
        {
          maxFraction: fc.double({ min: 1e-6, max: 1, noNaN: true }),
          ahead: validDuration,
          ttl: validDuration,
          horizon: validDuration,
        },
        { requiredKeys: [] },
      ),
    ),
    fail: fc.constantFrom('local', 'open', 'closed'),
  },
  { requiredKeys: ['algorithm', 'rate'] },
);

const fail = fc.constantFrom('local', 'open', 'closed');
const limit = fc.oneof(fc.integer({ min: 1, max: 1000 }), fc.constantFrom(1, 1e6));
const windowLease = fc.oneof(
  fc.constant('exact'),
  fc.record(
    {
      maxFraction: fc.double({ min: 1e-6, max: 1, noNaN: true }),
      ttl: validDuration,
      horizon: validDuration,
    },
    { requiredKeys: [] },
  ),
);
/** The other algorithms, so their engines and fail policies meet the same random traffic. */
const validOther = fc.oneof(
  fc.record(
    {
      algorithm: fc.constant('fixed-window'),
      limit,
      window: fc.oneof(
        fc.constantFrom('1s', '1m', '1h', '1d', 'month'),
        fc.integer({ min: 1, max: 86_400_000 }),
      ),
      lease: windowLease,
      fail,
    },
    { requiredKeys: ['algorithm', 'limit', 'window'] },
  ),
  fc.record(
    {
      algorithm: fc.constant('sliding-window'),
      limit,
      window: fc.constantFrom('1s', '1m', '1h'),
      lease: windowLease,
      fail,
    },
    { requiredKeys: ['algorithm', 'limit', 'window'] },
  ),
  fc.record(
    {
      algorithm: fc.constant('sliding-log'),
      limit: fc.integer({ min: 1, max: 100 }),
      window: fc.constantFrom('1s', '1m'),
      quantum: fc.constantFrom('100ms', '1s'),
      fail,
    },
    { requiredKeys: ['algorithm', 'limit', 'window'] },
  ),
  fc.record(
    { algorithm: fc.constant('leaky-bucket'), rate: positive, period: validDuration, burst: positive, fail },
    { requiredKeys: ['algorithm', 'rate'] },
  ),
  fc.record({ algorithm: fc.constant('concurrency'), limit: fc.integer({ min: 1, max: 50 }) }),
);
const validPolicy = fc.oneof(
  { weight: 3, arbitrary: validTokenBucket },
  { weight: 2, arbitrary: validOther },
);

const anyPolicy = fc.record(
  {
    algorithm: fc.oneof({ weight: 9, arbitrary: fc.constant('token-bucket') }, fc.constantFrom('nope', 42)),
    rate: anyNumber,
    period: duration,
    burst: anyNumber,
    lease: fc.oneof(
      fc.constant('exact'),
      fc.record(
        { maxFraction: anyNumber, ahead: duration, ttl: duration, horizon: duration },
        { requiredKeys: [] },
      ),
      fc.constantFrom('sometimes', null),
    ),
    fail: fc.oneof(
      { weight: 5, arbitrary: fc.constantFrom('local', 'open', 'closed') },
      fc.constant('maybe'),
    ),
  },
  { requiredKeys: ['algorithm', 'rate'] },
);

const policy = fc.oneof({ weight: 6, arbitrary: validPolicy }, { weight: 1, arbitrary: anyPolicy });

const key = fc.oneof(
  fc.string({ maxLength: 12 }),
  fc.string({ unit: 'grapheme', maxLength: 8 }),
  fc.constantFrom('', '{}', '}{', '{a}', '\udc00', 'x'.repeat(10_240)),
  fc.constantFrom(42, null, undefined),
);
const cost = fc.oneof(
  { weight: 3, arbitrary: fc.constant(undefined) },
  { weight: 3, arbitrary: positive },
  anyNumber,
);
const policyName = fc.constantFrom('a', 'b', 'c', 'missing');

const op = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({ kind: fc.constant('consume' as const), policy: policyName, key, cost }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('multi' as const),
      checks: fc.array(fc.record({ policy: policyName, key, cost }, { requiredKeys: ['policy', 'key'] }), {
        maxLength: 3,
      }),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('concurrent' as const),
      keys: fc.array(fc.tuple(policyName, key, cost), { minLength: 2, maxLength: 6 }),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('sweep' as const) }) },
  {
    weight: 2,
    arbitrary: fc.record({ kind: fc.constant('advance' as const), ms: fc.integer({ min: 0, max: 5000 }) }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('outage' as const), down: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('close' as const) }) },
);

const scenario = fc.record({
  policies: fc.dictionary(fc.constantFrom('a', 'b', 'c'), policy, { minKeys: 1, maxKeys: 3 }),
  maxKeys: fc.oneof({ weight: 9, arbitrary: fc.integer({ min: 1, max: 20 }) }, fc.constantFrom(0, -1, 1.5)),
  expectedInstances: fc.oneof(
    { weight: 9, arbitrary: fc.integer({ min: 1, max: 8 }) },
    fc.constantFrom(0, Number.NaN),
  ),
  ops: fc.array(op, { maxLength: 25 }),
});

const SOURCES = new Set(['lease', 'store', 'fallback']);

function checkDecision(d: Decision, names: Set<string>): void {
  const where = JSON.stringify(d);
  expect(typeof d.allowed, where).toBe('boolean');
  expect(names.has(d.policy), where).toBe(true);
  expect(typeof d.key, where).toBe('string');
  expect(Number.isFinite(d.limit) && d.limit > 0, where).toBe(true);
  expect(Number.isFinite(d.remaining) && d.remaining >= 0 && d.remaining <= d.limit, where).toBe(true);
  expect(Number.isFinite(d.resetMs) && d.resetMs >= 0, where).toBe(true);
  if (d.allowed) expect(d.retryAfterMs, where).toBe(0);
  else expect(d.retryAfterMs > 0, where).toBe(true); // Infinity allowed: the cost can never pass
  expect(SOURCES.has(d.source ?? ''), where).toBe(true);
}

/** Runs one scenario; any outcome other than a valid decision or a typed error fails it. */
type Scenario = typeof scenario extends fc.Arbitrary<infer T> ? T : never;

async function run(s: Scenario, makeStore: (now: () => number) => Store) {
  let t = 1_000_000;
  const now = () => t;
  const faulty = new FaultyStore(makeStore(now));
  let limiter: Limiter;
  try {
    limiter = new Limiter({
      store: faulty,
      policies: s.policies as never,
      now,
      maxKeys: s.maxKeys,
      expectedInstances: s.expectedInstances,
      sweepIntervalMs: 0,
    });
  } catch (err) {
    expect(err, String(err)).toBeInstanceOf(TokenleaseError);
    expect((err as TokenleaseError).field, String(err)).toBeTypeOf('string');
    await faulty.close();
    return;
  }
  const names = new Set(Object.keys(s.policies));
  const outcome = async (p: Promise<Decision>) => {
    try {
      checkDecision(await p, names);
    } catch (err) {
      if (!(err instanceof TokenleaseError)) throw err;
    }
  };
  const consume = limiter.consume.bind(limiter) as (...args: unknown[]) => Promise<Decision>;
  for (const o of s.ops) {
    if (o.kind === 'consume') await outcome(consume(o.policy, o.key, o.cost));
    else if (o.kind === 'multi') await outcome(consume(o.checks));
    else if (o.kind === 'concurrent') await Promise.all(o.keys.map(([p, k, c]) => outcome(consume(p, k, c))));
    else if (o.kind === 'sweep') limiter.sweep();
    else if (o.kind === 'advance') t += o.ms;
    else if (o.kind === 'outage') faulty.fault = o.down ? 'down' : 'none';
    else await limiter.close();
  }
  faulty.fault = 'none';
  await limiter.close();
  const stats = limiter.stats();
  for (const [name, value] of Object.entries(stats)) {
    if (typeof value === 'number') expect(Number.isFinite(value) && value >= 0, name).toBe(true);
  }
  await faulty.close();
}

describe('fuzzing the public API', () => {
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => unhandled.push(reason);

  it('MemoryStore: only valid decisions or typed errors, never a crash', async () => {
    process.on('unhandledRejection', onUnhandled);
    try {
      await fc.assert(
        fc.asyncProperty(scenario, (s) => run(s, (now) => new MemoryStore({ now }))),
        { numRuns: 300 },
      );
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });

  it('RedisStore: the same, and every key it writes has a TTL', async () => {
    const client = redisClient({ enableOfflineQueue: false, autoResendUnfulfilledCommands: false });
    const prefix = uniquePrefix('fuzz');
    await new RedisStore({ client }).ready();
    process.on('unhandledRejection', onUnhandled);
    try {
      await fc.assert(
        fc.asyncProperty(scenario, (s) => run(s, () => new RedisStore({ client, prefix, timeoutMs: 2000 }))),
        { numRuns: 60 },
      );
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
    const keys: string[] = [];
    let cursor = '0';
    do {
      const [next, batch] = await client.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
      cursor = next;
      keys.push(...batch);
    } while (cursor !== '0');
    const ttls = await Promise.all(keys.map((k) => client.pttl(k)));
    expect(
      keys.filter((_, i) => ttls[i] === -1),
      'keys without a TTL',
    ).toEqual([]);
  });
});
