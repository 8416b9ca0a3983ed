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
});
