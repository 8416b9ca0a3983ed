import { afterAll, describe, expect, it } from 'vitest';
import {
  ArgumentError,
  ConfigError,
  type Duration,
  Limiter,
  type PolicyConfig,
  RedisStore,
  TokenleaseError,
} from '../../src/index.js';
import { closeAllClients, redisClient } from '../support/clients.js';
import { thrown } from '../support/thrown.js';

afterAll(closeAllClients);

const rejection = (run: () => unknown) => thrown(TokenleaseError, run);

const bucket = { b: { algorithm: 'token-bucket', rate: 10 } } as const;
const slots = (slotTtl: Duration): Record<string, PolicyConfig> => ({
  c: { algorithm: 'concurrency', limit: 5, slotTtl },
});

describe('millisecond options have upper bounds (issue 13 follow-up)', () => {
  it.each([Number.NaN, Number.POSITIVE_INFINITY, -1, 5001, 86_400_000, 2 ** 31, '500'])(
    'sweepIntervalMs %s is refused, naming the field and the range',
    (ms) => {
      const err = rejection(() => new Limiter({ policies: bucket, sweepIntervalMs: ms as number }));
      expect(err).toBeInstanceOf(ConfigError);
      expect(err.field).toBe('sweepIntervalMs');
      expect(err.message).toMatch(/from 0 \(no timer\) to 5000/);
    },
  );

  it.each([Number.NaN, Number.POSITIVE_INFINITY, -1, 60_001, '2000'])(
    'closeTimeoutMs %s is refused, naming the field and the range',
    (ms) => {
      const err = rejection(() => new Limiter({ policies: bucket, closeTimeoutMs: ms as number }));
      expect(err).toBeInstanceOf(ConfigError);
      expect(err.field).toBe('closeTimeoutMs');
      expect(err.message).toMatch(/from 0 to 60000/);
    },
  );

  it.each([0, 1, 500, 5000])('sweepIntervalMs %s is accepted', async (ms) => {
    const limiter = new Limiter({ policies: bucket, sweepIntervalMs: ms });
    expect((await limiter.consume('b', 'k')).allowed).toBe(true);
    await limiter.close();
  });

  it.each([Number.NaN, Number.POSITIVE_INFINITY, -1, 0, 60_001, 2 ** 31, '50'])(
    'RedisStore timeoutMs %s is refused, naming the field and the range',
    (ms) => {
      const err = rejection(() => new RedisStore({ client: redisClient(), timeoutMs: ms as number }));
      expect(err).toBeInstanceOf(ConfigError);
      expect(err.field).toBe('timeoutMs');
      expect(err.message).toMatch(/at most 60000/);
    },
  );

  it.each([Number.NaN, Number.POSITIVE_INFINITY, -1, 2 ** 31, 1e300])(
    'reserve maxWaitMs %s is refused, naming the argument',
    async (ms) => {
      const limiter = new Limiter({ policies: { l: { algorithm: 'leaky-bucket', rate: 10 } } });
      const err = await limiter.reserve('l', 'k', 1, { maxWaitMs: ms }).then(
        () => new Error('accepted'),
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(ArgumentError);
      expect((err as ArgumentError).field).toBe('options.maxWaitMs');
      expect((err as Error).message).toMatch(/from 0 to 2147483647/);
      await limiter.close();
    },
  );

  it('the longest timer wait is still accepted', async () => {
    const limiter = new Limiter({ policies: { l: { algorithm: 'leaky-bucket', rate: 10 } } });
    const r = await limiter.reserve('l', 'k', 1, { maxWaitMs: 2 ** 31 - 1 });
    expect(r.allowed).toBe(true);
    await limiter.close();
  });
});

describe('concurrency slotTtl must outlast two sweeps', () => {
  it('a slotTtl of at most twice sweepIntervalMs is refused, naming both', () => {
    for (const [slotTtl, sweepIntervalMs] of [
      ['1s', 500],
      ['999ms', 500],
      ['5s', 5000],
    ] as const) {
      const err = rejection(() => new Limiter({ policies: slots(slotTtl), sweepIntervalMs }));
      expect(err, `slotTtl ${slotTtl}, sweep ${sweepIntervalMs}`).toBeInstanceOf(ConfigError);
      expect(err.field).toBe('policies.c.slotTtl');
      expect(err.message).toMatch(
        /`slotTtl` \(\d+ ms\) must be more than twice `sweepIntervalMs` \(\d+ ms\)/,
      );
    }
  });

  it('a slotTtl above twice the sweep, or no sweep timer, is accepted', async () => {
    for (const limiter of [
      new Limiter({ policies: slots('1001ms'), sweepIntervalMs: 500 }),
      new Limiter({ policies: slots('10ms'), sweepIntervalMs: 0 }),
    ]) {
      const handle = await limiter.acquire('c', 'k');
      expect(handle.allowed).toBe(true);
      await handle.release();
      await limiter.close();
    }
  });

  it('setPolicies refuses it too, and changes nothing', async () => {
    const limiter = new Limiter({ policies: slots('30s') });
    const err = rejection(() => limiter.setPolicies(slots('1s')));
    expect(err.field).toBe('policies.c.slotTtl');
    expect(limiter.describe('c').windowSeconds, 'the old policy still runs').toBe(30);
    await limiter.close();
  });
});
