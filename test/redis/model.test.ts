import fc from 'fast-check';
import { afterAll, describe, it } from 'vitest';
import { MemoryStore, RedisStore } from '../../src/index.js';
import { closeAllClients, redisClient, uniquePrefix } from '../support/clients.js';
import { type History, MODEL_SPECS, type Step } from '../support/modelSpecs.js';

afterAll(closeAllClients);

interface Real {
  redis: RedisStore;
  memory: MemoryStore;
  clock: { t: number };
  key: string;
  history: History;
}
type Model = Record<string, never>;

/** Runs one operation on both stores and requires the same answer. */
class RunOp implements fc.AsyncCommand<Model, Real> {
  constructor(readonly step: Extract<Step, { kind: 'run' }>) {}
  check = () => true;
  async run(_: Model, r: Real) {
    const { op, request, after } = this.step;
    const req = request(r.history);
    const [a, b] = await Promise.all([r.redis.run(op, r.key, req), r.memory.run(op, r.key, req)]);
    if (JSON.stringify(a) !== JSON.stringify(b)) {
      throw new Error(
        `${op.script} differs at t=${r.clock.t} for ${JSON.stringify(req)}: redis ${JSON.stringify(a)} memory ${JSON.stringify(b)}`,
      );
    }
    after?.(r.history, req, a);
  }
  toString = () => this.step.label;
}

/**
 * Runs several operations at once: on Redis they go in one batch (one script call), in memory one
 * after the other. Requests are built from the history as it stands before the batch, as concurrent
 * callers would build them.
 */
class RunBatch implements fc.AsyncCommand<Model, Real> {
  constructor(readonly steps: readonly Extract<Step, { kind: 'run' }>[]) {}
  check = () => true;
  async run(_: Model, r: Real) {
    const reqs = this.steps.map((s) => s.request(r.history));
    const before = r.redis.roundTrips;
    const redis = await Promise.all(
      this.steps.map((s, i) => r.redis.run(s.op, r.key, reqs[i]).then(ok, failed)),
    );
    if (r.redis.roundTrips - before !== 1)
      throw new Error(`batch of ${reqs.length} took ${r.redis.roundTrips - before} round trips`);
    for (const [i, s] of this.steps.entries()) {
      const memory = await r.memory.run(s.op, r.key, reqs[i]).then(ok, failed);
      if (JSON.stringify(redis[i]) !== JSON.stringify(memory)) {
        throw new Error(
          `${s.op.script} (item ${i} of a batch) differs at t=${r.clock.t} for ${JSON.stringify(reqs[i])}: redis ${JSON.stringify(redis[i])} memory ${JSON.stringify(memory)}`,
        );
      }
      if (memory.ok) s.after?.(r.history, reqs[i], memory.value);
    }
  }
  toString = () => `batch(${this.steps.map((s) => s.label).join(', ')})`;
}

const ok = (value: unknown) => ({ ok: true as const, value });
const failed = (err: unknown) => ({ ok: false as const, value: String(err) });

class Advance implements fc.AsyncCommand<Model, Real> {
  constructor(readonly ms: number) {}
  check = () => true;
  async run(_: Model, r: Real) {
    r.clock.t += this.ms;
  }
  toString = () => `advance(${this.ms})`;
}

describe.each(MODEL_SPECS)('$name: Lua on Redis and MemoryStore answer identically', (spec) => {
  it('on random operation sequences with an explicit clock', async () => {
    // Already safe, so every RedisStore below uses this one connection instead of a duplicate.
    const client = redisClient({ enableOfflineQueue: false, autoResendUnfulfilledCommands: false });
    await new RedisStore({ client }).ready();
    const prefix = uniquePrefix('model');
    let runs = 0;
    await fc.assert(
      fc.asyncProperty(spec.steps, async (steps) => {
        const clock = { t: spec.start };
        const now = () => clock.t;
        const real: Real = {
          redis: new RedisStore({ client, now, prefix, timeoutMs: 2000 }),
          memory: new MemoryStore({ now }),
          clock,
          key: `run${runs++}`,
          history: { seq: 0, window: 0, admitted: [], slots: [] },
        };
        const commands = steps.map((s) => (s.kind === 'advance' ? new Advance(s.ms) : new RunOp(s)));
        await fc.asyncModelRun(() => ({ model: {}, real }), commands);
        await real.redis.close();
      }),
      { numRuns: spec.runs },
    );
  });

  it('on random sequences of batches: a batch answers as its operations one after the other', async () => {
    const client = redisClient({ enableOfflineQueue: false, autoResendUnfulfilledCommands: false });
    await new RedisStore({ client }).ready();
    const prefix = uniquePrefix('model-batch');
    let runs = 0;
    await fc.assert(
      fc.asyncProperty(
        spec.steps,
        fc.array(fc.integer({ min: 1, max: 5 }), { minLength: 1 }),
        async (steps, sizes) => {
          const clock = { t: spec.start };
          const now = () => clock.t;
          const real: Real = {
            redis: new RedisStore({ client, now, prefix, timeoutMs: 2000 }),
            memory: new MemoryStore({ now }),
            clock,
            key: `batch${runs++}`,
            history: { seq: 0, window: 0, admitted: [], slots: [] },
          };
          const commands: fc.AsyncCommand<Model, Real>[] = [];
          let batch: Extract<Step, { kind: 'run' }>[] = [];
          let size = 0;
          const cut = () => {
            if (batch.length > 0) commands.push(new RunBatch(batch));
            batch = [];
            size = sizes[commands.length % sizes.length] ?? 1;
          };
          cut();
          for (const s of steps) {
            if (s.kind === 'advance') {
              cut();
              commands.push(new Advance(s.ms));
            } else {
              batch.push(s);
              if (batch.length >= size) cut();
            }
          }
          cut();
          await fc.asyncModelRun(() => ({ model: {}, real }), commands);
          await real.redis.close();
        },
      ),
      { numRuns: spec.runs },
    );
  });
});
