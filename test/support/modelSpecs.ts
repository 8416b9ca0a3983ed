/**
 * Random operation sequences per algorithm for the model-based test (test/redis/model.test.ts):
 * each spec draws a policy shape and a list of steps; a step runs one store operation (built from
 * what earlier steps returned, e.g. slot ids or window indexes) or advances the explicit clock.
 */
import fc from 'fast-check';
import { MONTH } from '../../src/algorithms/fixedWindow.js';
import type { Operation } from '../../src/index.js';
import { concurrencyAcquire, concurrencyRelease, concurrencyRenew } from '../../src/stores/concurrencyOps.js';
import { fleetHeartbeat } from '../../src/stores/fleetOps.js';
import { leakyBucketCancel, leakyBucketPeek, leakyBucketReserve } from '../../src/stores/leakyBucketOps.js';
import {
  quantisedLogAcquire,
  quantisedLogPeek,
  quantisedLogRelease,
  slidingLogAcquire,
  slidingLogPeek,
  slidingLogRelease,
} from '../../src/stores/slidingLogOps.js';
import {
  tokenBucketAcquire,
  tokenBucketDebit,
  tokenBucketPeek,
  tokenBucketRelease,
  tokenBucketSync,
} from '../../src/stores/tokenBucketOps.js';
import {
  fixedWindowAcquire,
  fixedWindowPeek,
  fixedWindowRelease,
  fixedWindowSync,
  slidingWindowAcquire,
  slidingWindowPeek,
  slidingWindowRelease,
  slidingWindowSync,
} from '../../src/stores/windowOps.js';

/** What earlier steps of one run produced, for later steps to refer to. */
export interface History {
  seq: number;
  /** Last window index a window grant named. */
  window: number;
  /** Admitted log requests (id or bucket, cost). */
  admitted: { id: string; bucket: number; cost: number }[];
  /** Slot ids granted so far. */
  slots: string[];
}

export type Step = (
  | {
      kind: 'run';
      label: string;
      op: Operation<unknown, unknown, unknown>;
      request: (h: History) => unknown;
      /** Records what the (identical) result means for later steps. */
      after?: (h: History, request: unknown, result: unknown) => void;
    }
  | { kind: 'advance'; ms: number }
) & { [fc.toStringMethod]: () => string };

export interface ModelSpec {
  name: string;
  /** Clock at the start of each run (a month edge for calendar windows). */
  start: number;
  runs: number;
  steps: fc.Arbitrary<Step[]>;
}

const run = <S, Req, Res>(
  label: string,
  op: Operation<S, Req, Res>,
  request: (h: History) => Req,
  after?: (h: History, request: Req, result: Res) => void,
): Step => ({
  kind: 'run',
  label,
  // fast-check prints counterexamples with this instead of the operation's source.
  [fc.toStringMethod]: () => label,
  op: op as unknown as Operation<unknown, unknown, unknown>,
  request,
  after: after as ((h: History, request: unknown, result: unknown) => void) | undefined,
});

const advance = (max: number) =>
  fc
    .oneof(fc.integer({ min: 0, max }), fc.double({ min: 0, max: 5, noNaN: true }))
    .map((ms): Step => ({ kind: 'advance', ms, [fc.toStringMethod]: () => `advance(${ms})` }));

const tokens = fc.oneof(fc.integer({ min: 1, max: 50 }), fc.double({ min: 0.001, max: 50, noNaN: true }));

const tokenBucket: ModelSpec = {
  name: 'token bucket',
  start: 1_700_000_000_000,
  runs: 120,
  steps: fc
    .record({
      rate: fc.constantFrom(1, 3, 10, 100, 1_000_000),
      periodMs: fc.constantFrom(1, 1000, 60_000, 86_400_000),
      burst: fc.constantFrom(1, 5, 100, 1e6),
    })
    .chain((s) =>
      fc.array(
        fc.oneof(
          fc
            .record({
              want: tokens,
              min: fc.double({ min: 0.001, max: 10, noNaN: true }),
              ahead: fc.oneof(fc.constant(0), fc.double({ min: 0, max: 100, noNaN: true })),
            })
            .map((x) => {
              const req = { ...s, want: x.want, min: Math.min(x.min, x.want), ahead: x.ahead };
              return run(`acquire ${JSON.stringify(req)}`, tokenBucketAcquire, () => req);
            }),
          fc.double({ min: 0, max: 60, noNaN: true }).map((t) => {
            const req = { ...s, tokens: t };
            return run(`release ${JSON.stringify(req)}`, tokenBucketRelease, () => req);
          }),
          fc.double({ min: 0.001, max: 60, noNaN: true }).map((t) => {
            const req = { ...s, tokens: t };
            return run(`debit ${JSON.stringify(req)}`, tokenBucketDebit, () => req);
          }),
          fc.constant(run('peek', tokenBucketPeek, () => s)),
          fc
            .record({
              used: fc.oneof(fc.constant(0), tokens),
              returned: fc.oneof(fc.constant(0), tokens),
              want: fc.oneof(fc.constant(0), tokens),
              min: fc.oneof(fc.constant(0), fc.double({ min: 0.001, max: 10, noNaN: true })),
              ahead: fc.oneof(fc.constant(0), fc.double({ min: 0, max: 100, noNaN: true })),
              allowance: fc.oneof(fc.constant(0), tokens, fc.constant(1e12)),
              fleet: fc.constantFrom(0, 1, 3, 20),
              holdMs: fc.constantFrom(0, 1, 2000, 60_000),
              spent: fc.oneof(fc.constant(0), tokens),
            })
            .map((x) => {
              const req = { ...s, ...x, min: Math.min(x.min, x.want) };
              return run(`sync ${JSON.stringify(req)}`, tokenBucketSync, () => req);
            }),
          advance(2000),
        ),
        { maxLength: 40 },
      ),
    ),
};

/** A window's operations, typed as the fixed window's (the sliding window's take the same requests). */
interface WindowOps {
  acquire: typeof fixedWindowAcquire;
  release: typeof fixedWindowRelease;
  sync: typeof fixedWindowSync;
  peek: typeof fixedWindowPeek;
}

const fixedWindow: WindowOps = {
  acquire: fixedWindowAcquire,
  release: fixedWindowRelease,
  sync: fixedWindowSync,
  peek: fixedWindowPeek,
};
const slidingWindow = {
  acquire: slidingWindowAcquire,
  release: slidingWindowRelease,
  sync: slidingWindowSync,
  peek: slidingWindowPeek,
} as unknown as WindowOps;

function windowSpec(
  name: string,
  { acquire, release, sync, peek }: WindowOps,
  windows: number[],
  start: number,
  /** Fixed window anchors to draw from (`firstHit` is ignored by the others). */
  firstHit: boolean[] = [false],
): ModelSpec {
  return {
    name,
    start,
    runs: 100,
    steps: fc
      .record({
        limit: fc.constantFrom(1, 2.5, 5, 100, 1e6),
        windowMs: fc.constantFrom(...windows),
        firstHit: fc.constantFrom(...firstHit),
      })
      .chain((s) =>
        fc.array(
          fc.oneof(
            fc
              .record({
                want: tokens,
                min: fc.double({ min: 0.001, max: 10, noNaN: true }),
                ahead: fc.boolean(),
              })
              .map((x) => {
                const req = { ...s, want: x.want, min: Math.min(x.min, x.want), ahead: x.ahead };
                return run(
                  `acquire ${JSON.stringify(req)}`,
                  acquire,
                  () => req,
                  (h, _req, result) => {
                    h.window = result.window;
                  },
                );
              }),
            fc
              .record({
                offset: fc.constantFrom(0, 0, 0, -1, 1),
                tokens: fc.double({ min: 0, max: 60, noNaN: true }),
              })
              .map((x) =>
                run(`release ${JSON.stringify(x)}`, release, (h) => ({
                  windowMs: s.windowMs,
                  window: Math.max(0, h.window + x.offset),
                  tokens: x.tokens,
                })),
              ),
            // A report for the window last granted (or the one before or after it), then an
            // allowance or a slice; both stores must agree on what settles where and what is granted.
            fc
              .record({
                offset: fc.constantFrom(0, 0, 0, -1, 1),
                used: fc.oneof(fc.constant(0), tokens),
                returned: fc.oneof(fc.constant(0), tokens),
                want: fc.oneof(fc.constant(0), tokens),
                min: fc.oneof(fc.constant(0), fc.double({ min: 0.001, max: 10, noNaN: true })),
                ahead: fc.boolean(),
                allowance: fc.oneof(fc.constant(0), tokens, fc.constant(1e12)),
                fleet: fc.constantFrom(0, 1, 3, 20),
              })
              .map(({ offset, ...x }) =>
                run(
                  `sync ${JSON.stringify({ offset, ...x })}`,
                  sync,
                  (h) => ({
                    ...s,
                    ...x,
                    min: Math.min(x.min, x.want),
                    window: Math.max(0, h.window + offset),
                  }),
                  (h, _req, result) => {
                    h.window = result.window;
                  },
                ),
              ),
            fc.constant(run('peek', peek, () => s)),
            // Month windows need days to pass.
            advance(s.windowMs === MONTH ? 20 * 86_400_000 : Math.ceil(s.windowMs * 0.7)),
          ),
          { maxLength: 40 },
        ),
      ),
  };
}

const slidingLog: ModelSpec = {
  name: 'sliding log',
  start: 1_700_000_000_000,
  runs: 100,
  steps: fc
    .record({ limit: fc.constantFrom(1, 3, 10, 50), windowMs: fc.constantFrom(10, 1000, 60_000) })
    .chain((s) =>
      fc.array(
        fc.oneof(
          fc.integer({ min: 1, max: 6 }).map((cost) =>
            run(
              `acquire cost ${cost}`,
              slidingLogAcquire,
              (h) => ({ ...s, cost, id: `r${h.seq++}` }),
              (h, req, result) => {
                if (result.allowed) h.admitted.push({ id: req.id, bucket: -1, cost });
              },
            ),
          ),
          fc.nat().map((pick) =>
            run(`refund #${pick}`, slidingLogRelease, (h) => {
              const a = h.admitted[pick % Math.max(1, h.admitted.length)] ?? { id: 'none', cost: 1 };
              return { windowMs: s.windowMs, cost: a.cost, id: a.id };
            }),
          ),
          fc.constant(run('peek', slidingLogPeek, () => s)),
          advance(Math.ceil(s.windowMs * 0.6)),
        ),
        { maxLength: 40 },
      ),
    ),
};

const quantisedLog: ModelSpec = {
  name: 'quantised sliding log',
  start: 1_700_000_000_000,
  runs: 100,
  steps: fc
    .record({
      limit: fc.constantFrom(1, 3, 10, 50),
      shape: fc.constantFrom(
        { windowMs: 1000, quantumMs: 100 },
        { windowMs: 60_000, quantumMs: 1000 },
        { windowMs: 1000, quantumMs: 1000 },
        { windowMs: 10, quantumMs: 3 },
      ),
    })
    .chain(({ limit, shape }) =>
      fc.array(
        fc.oneof(
          fc.integer({ min: 1, max: 6 }).map((cost) =>
            run(
              `acquire cost ${cost}`,
              quantisedLogAcquire,
              () => ({ limit, ...shape, cost }),
              (h, _req, result) => {
                if (result.allowed) h.admitted.push({ id: '', bucket: result.bucket, cost });
              },
            ),
          ),
          fc.nat().map((pick) =>
            run(`refund #${pick}`, quantisedLogRelease, (h) => {
              const a = h.admitted[pick % Math.max(1, h.admitted.length)] ?? { bucket: 0, cost: 1 };
              return { ...shape, bucket: a.bucket, cost: a.cost };
            }),
          ),
          fc.constant(run('peek', quantisedLogPeek, () => ({ limit, ...shape }))),
          advance(Math.ceil(shape.windowMs * 0.6)),
          // Now and then idle past the whole window (the all-expired shortcut).
          fc.constant<Step>({
            kind: 'advance',
            ms: shape.windowMs * 3,
            [fc.toStringMethod]: () => `advance(${shape.windowMs * 3})`,
          }),
        ),
        { maxLength: 40 },
      ),
    ),
};

const leakyBucket: ModelSpec = {
  name: 'leaky bucket',
  start: 1_700_000_000_000,
  runs: 100,
  steps: fc
    .record({
      rate: fc.constantFrom(1, 10, 1000),
      periodMs: fc.constantFrom(1000, 60_000),
      burst: fc.constantFrom(1, 2.5, 5),
    })
    .chain((s) =>
      fc.array(
        fc.oneof(
          fc
            .record({
              cost: fc.oneof(fc.integer({ min: 1, max: 5 }), fc.double({ min: 0.01, max: 5, noNaN: true })),
              maxWaitMs: fc.constantFrom(0, 100, 5000, 120_000),
            })
            .map((x) => {
              const req = { ...s, ...x };
              return run(`reserve ${JSON.stringify(x)}`, leakyBucketReserve, () => req);
            }),
          fc
            .integer({ min: 1, max: 5 })
            .map((cost) =>
              run(`cancel ${cost}`, leakyBucketCancel, () => ({ rate: s.rate, periodMs: s.periodMs, cost })),
            ),
          fc.constant(run('peek', leakyBucketPeek, () => s)),
          advance(Math.ceil((s.periodMs / s.rate) * 3)),
        ),
        { maxLength: 40 },
      ),
    ),
};

const concurrency: ModelSpec = {
  name: 'concurrency',
  start: 1_700_000_000_000,
  runs: 100,
  steps: fc
    .record({ limit: fc.constantFrom(1, 3, 10), ttlMs: fc.constantFrom(100, 1000, 30_000) })
    .chain((s) =>
      fc.array(
        fc.oneof(
          fc.record({ want: fc.integer({ min: 1, max: 5 }), min: fc.integer({ min: 1, max: 5 }) }).map((x) =>
            run(
              `acquire ${JSON.stringify(x)}`,
              concurrencyAcquire,
              (h) => ({
                limit: s.limit,
                want: x.want,
                min: Math.min(x.min, x.want),
                ttlMs: s.ttlMs,
                owner: `o${h.seq++}`,
                first: 3,
              }),
              (h, req, result) => {
                for (let i = 0; i < result.granted; i++) h.slots.push(`${req.owner}:${req.first + i}`);
              },
            ),
          ),
          fc.array(fc.nat(), { minLength: 1, maxLength: 4 }).map((picks) =>
            run(`release ${picks}`, concurrencyRelease, (h) => ({
              ids: picks.map((p) => h.slots[p % Math.max(1, h.slots.length)] ?? 'unknown:0'),
            })),
          ),
          fc.array(fc.nat(), { minLength: 1, maxLength: 4 }).map((picks) =>
            run(`renew ${picks}`, concurrencyRenew, (h) => ({
              ids: picks.map((p) => h.slots[p % Math.max(1, h.slots.length)] ?? 'unknown:0'),
              ttlMs: s.ttlMs,
              limit: s.limit,
            })),
          ),
          advance(Math.ceil(s.ttlMs * 0.6)),
        ),
        { maxLength: 40 },
      ),
    ),
};

const fleet: ModelSpec = {
  name: 'fleet heartbeat',
  start: 1_700_000_000_000,
  runs: 60,
  // One window per run, as a fleet has: the key's TTL is the window of the last beat.
  steps: fc.constantFrom(1, 1000, 5000).chain((windowMs) =>
    fc.array(
      fc.oneof(
        fc
          .constantFrom('a', 'b', 'c', 'd')
          .map((id) => run(`heartbeat ${id} ${windowMs}`, fleetHeartbeat, () => ({ id, windowMs }))),
        advance(3000),
      ),
      { maxLength: 40 },
    ),
  ),
};

export const MODEL_SPECS: readonly ModelSpec[] = [
  tokenBucket,
  fleet,
  windowSpec('fixed window', fixedWindow, [1, 1000, 60_000], 1_700_000_000_000),
  // Windows opening at the first grant: fractional indexes, and starts off the epoch grid (the
  // odd clock start and the 7 ms windows keep them off it).
  windowSpec('fixed window, first-hit anchor', fixedWindow, [1, 7, 1000, 60_000], 1_700_000_000_333, [true]),
  // Starts the day before a leap day, an hour before midnight: runs cross month (and year) edges.
  windowSpec('fixed window, calendar months', fixedWindow, [MONTH], Date.UTC(2024, 1, 28, 23)),
  windowSpec('sliding window', slidingWindow, [7, 1000, 60_000], 1_700_000_000_000),
  slidingLog,
  quantisedLog,
  leakyBucket,
  concurrency,
];
