import fc from 'fast-check';
import { afterAll, describe, it } from 'vitest';
import type { AcquireRequest, DebitRequest, ReleaseRequest } from '../../src/algorithms/tokenBucket.js';
import { MemoryStore, RedisStore } from '../../src/index.js';
import { tokenBucketAcquire, tokenBucketDebit, tokenBucketRelease } from '../../src/stores/tokenBucketOps.js';
import { closeAllClients, redisClient, uniquePrefix } from '../support/clients.js';

afterAll(closeAllClients);

interface Real {
  redis: RedisStore;
  memory: MemoryStore;
  clock: { t: number };
  key: string;
}
type Model = Record<string, never>;

const shape = fc.record({
  rate: fc.constantFrom(1, 3, 10, 100, 1_000_000),
  periodMs: fc.constantFrom(1, 1000, 60_000, 86_400_000),
  burst: fc.constantFrom(1, 5, 100, 1e6),
});

class Acquire implements fc.AsyncCommand<Model, Real> {
  constructor(readonly req: AcquireRequest) {}
  check = () => true;
  async run(_: Model, r: Real) {
    const [a, b] = await Promise.all([
      r.redis.run(tokenBucketAcquire, r.key, this.req),
      r.memory.run(tokenBucketAcquire, r.key, this.req),
    ]);
    if (JSON.stringify(a) !== JSON.stringify(b)) {
      throw new Error(
        `acquire differs at t=${r.clock.t}: redis ${JSON.stringify(a)} memory ${JSON.stringify(b)}`,
      );
    }
  }
  toString = () => `acquire(${JSON.stringify(this.req)})`;
}

class Release implements fc.AsyncCommand<Model, Real> {
  constructor(readonly req: ReleaseRequest) {}
  check = () => true;
  async run(_: Model, r: Real) {
    await Promise.all([
      r.redis.run(tokenBucketRelease, r.key, this.req),
      r.memory.run(tokenBucketRelease, r.key, this.req),
    ]);
  }
  toString = () => `release(${JSON.stringify(this.req)})`;
}

class Debit implements fc.AsyncCommand<Model, Real> {
  constructor(readonly req: DebitRequest) {}
  check = () => true;
  async run(_: Model, r: Real) {
    const [a, b] = await Promise.all([
      r.redis.run(tokenBucketDebit, r.key, this.req),
      r.memory.run(tokenBucketDebit, r.key, this.req),
    ]);
    if (a !== b) throw new Error(`debit differs at t=${r.clock.t}: redis ${a} memory ${b}`);
  }
  toString = () => `debit(${JSON.stringify(this.req)})`;
}

class Advance implements fc.AsyncCommand<Model, Real> {
  constructor(readonly ms: number) {}
  check = () => true;
  async run(_: Model, r: Real) {
    r.clock.t += this.ms;
  }
  toString = () => `advance(${this.ms})`;
}

describe('token bucket: Lua on Redis and MemoryStore answer identically', () => {
  it('on random operation sequences with an explicit clock', async () => {
    // Already safe, so every RedisStore below uses this one connection instead of a duplicate.
    const client = redisClient({ enableOfflineQueue: false, autoResendUnfulfilledCommands: false });
    await new RedisStore({ client }).ready();
    const prefix = uniquePrefix('model');
    let run = 0;
    await fc.assert(
      fc.asyncProperty(
        shape,
        fc.array(
          fc.oneof(
            fc
              .record({
                want: fc.oneof(
                  fc.integer({ min: 1, max: 50 }),
                  fc.double({ min: 0.001, max: 50, noNaN: true }),
                ),
                min: fc.double({ min: 0.001, max: 10, noNaN: true }),
                ahead: fc.oneof(fc.constant(0), fc.double({ min: 0, max: 100, noNaN: true })),
              })
              .map((x) => ({ kind: 'acquire' as const, ...x })),
            fc
              .double({ min: 0, max: 60, noNaN: true })
              .map((tokens) => ({ kind: 'release' as const, tokens })),
            fc
              .double({ min: 0.001, max: 60, noNaN: true })
              .map((tokens) => ({ kind: 'debit' as const, tokens })),
            fc
              .oneof(
                fc.integer({ min: 0, max: 2000 }),
                fc.double({ min: 0, max: 5, noNaN: true }),
                // The store clock jumping backwards (NTP step, failover to a host with another clock).
                fc.integer({ min: -120_000, max: -1 }),
              )
              .map((ms) => ({ kind: 'advance' as const, ms })),
          ),
          { maxLength: 40 },
        ),
        async (s, ops) => {
          const clock = { t: 1_700_000_000_000 };
          const now = () => clock.t;
          const real: Real = {
            redis: new RedisStore({ client, now, prefix, timeoutMs: 2000 }),
            memory: new MemoryStore({ now }),
            clock,
            key: `run${run++}`,
          };
          const commands = ops.map((o) => {
            if (o.kind === 'advance') return new Advance(o.ms);
            if (o.kind === 'release') return new Release({ ...s, tokens: o.tokens });
            if (o.kind === 'debit') return new Debit({ ...s, tokens: o.tokens });
            return new Acquire({ ...s, want: o.want, min: Math.min(o.min, o.want), ahead: o.ahead });
          });
          await fc.asyncModelRun(() => ({ model: {}, real }), commands);
          await real.redis.close();
        },
      ),
      { numRuns: 120 },
    );
  });
});
