/**
 * `null` never means "the default": a config file's empty value or a JS caller's `null` is a typed
 * error naming the field, as it already was for every policy option. Before, the Limiter and
 * RedisStore read most of their options with `??`, so `maxKeys: null` or `timeoutMs: null`
 * silently ran the default while `observers: null`, `offenders: null` or `onWarning: null` were
 * refused; a multi-rule check's `cost: null` and `acquire(…, { cost: null })` took 1 where
 * `consume(policy, key, null)` was refused.
 */
import { afterAll, describe, expect, it } from 'vitest';
import {
  ArgumentError,
  ConfigError,
  Limiter,
  MemoryStore,
  RedisStore,
  type TokenleaseError,
} from '../../src/index.js';
import { closeAllClients, redisClient, uniquePrefix } from '../support/clients.js';
import { thrown } from '../support/thrown.js';

afterAll(closeAllClients);

const policies = {
  b: { algorithm: 'token-bucket', rate: 10 },
  slots: { algorithm: 'concurrency', limit: 3 },
} as const;

describe('a Limiter option set to null is a ConfigError naming it', () => {
  // Every option but `policies` (refused as null by its own check), from an options object using them all.
  const all = { store: new MemoryStore(), now: Date.now, maxKeys: 1, concurrency: 1, sweepIntervalMs: 0 };
  const more = { observers: [], offenders: false, expectedInstances: 1, closeTimeoutMs: 0, breaker: {} };
  it.each(Object.keys({ ...all, ...more }))('%s: null', (option) => {
    const err = thrown(ConfigError, () => new Limiter({ policies, [option]: null }));
    expect(err.field).toBe(option);
    expect(err.message).toContain('got null');
  });

  it.each([
    [{ breaker: { failures: null } }, 'breaker.failures'],
    [{ breaker: { coolDown: null } }, 'breaker.coolDown'],
    [{ offenders: { capacity: null } }, 'offenders.capacity'],
    [{ offenders: { halfLife: null } }, 'offenders.halfLife'],
  ])('%j', (options, field) => {
    const err = thrown(ConfigError, () => new Limiter({ policies, ...(options as object) }));
    expect(err.field).toBe(field);
  });

  it.each([['breaker']])('%s: a list is not an options object', (option) => {
    const err = thrown(ConfigError, () => new Limiter({ policies, [option]: [] }));
    expect(err.field).toBe(option);
  });
});

describe('a RedisStore option set to null is a ConfigError naming it', () => {
  it.each(['timeoutMs', 'prefix', 'now', 'onWarning', 'slotGroups', 'batch'])('%s: null', (option) => {
    const err = thrown(ConfigError, () => new RedisStore({ client: redisClient(), [option]: null }));
    expect(err.field).toBe(option);
    expect(err.message).toContain('got null');
  });

  it.each(['maxItems', 'maxWaitMs', 'maxInFlight'])('batch.%s: null', (option) => {
    const err = thrown(
      ConfigError,
      () => new RedisStore({ client: redisClient(), batch: { [option]: null } as never }),
    );
    expect(err.field).toBe(`batch.${option}`);
  });
});

describe('a cost set to null is an ArgumentError naming it, and takes nothing', () => {
  it('in a multi-rule check, in acquire() and in consume()', async () => {
    const store = new RedisStore({
      client: redisClient(),
      prefix: uniquePrefix('null-cost'),
      timeoutMs: 2000,
    });
    const limiter = new Limiter({ store, policies, sweepIntervalMs: 0 });
    const calls: [() => Promise<unknown>, string][] = [
      [() => limiter.consume([{ policy: 'b', key: 'k', cost: null as never }]), 'checks[0].cost'],
      [
        () =>
          limiter.consume([
            { policy: 'b', key: 'k' },
            { policy: 'b', key: 'j', cost: null as never },
          ]),
        'checks[1].cost',
      ],
      [() => limiter.acquire('slots', 'k', { cost: null as never }), 'options.cost'],
      [() => limiter.consume('b', 'k', null as never), 'cost'],
    ];
    for (const [call, field] of calls) {
      const err = await call().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err, field).toBeInstanceOf(ArgumentError);
      expect((err as TokenleaseError).field).toBe(field);
    }
    const slots = await limiter.acquire('slots', 'k', { cost: 3 });
    expect(slots.allowed, 'all three slots are still free').toBe(true);
    await slots.release();
    expect((await limiter.peek('b', 'k')).remaining, 'no token taken').toBe(10);
    await limiter.close();
    await store.close();
  });
});
