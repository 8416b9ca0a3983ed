/**
 * The write-behind bound under faults, on the pure level (no Redis): N instances share one key and,
 * in any order, sync with the store (reporting what they admitted under their allowance, asking for
 * an allowance or a lease), spend, have their sync answered, lost after the store applied it, or
 * lost before it ran, hand back what they hold, crash with unreported usage, or let time pass. Each
 * instance follows the lease core's rules (`src/engines/leasedKey.ts`): a sync sent is never sent
 * again and the usage it carried is not re-queued; the old allowance keeps serving until an answer
 * replaces it; what was spent while a sync was in flight comes off the allowance it brings.
 *
 * The bound tested (docs/architecture.md "Guarantees"): beyond the exact limiter, the usage
 * admitted under allowances and not yet counted by the store over the whole fleet — at most half a
 * bucket's burst, a quarter of a window's limit — plus, for every instance that crashed with
 * unreported usage and every report lost before it ran, at most one allowance: `floor(burst /
 * (2 · fleet))`, `floor(limit / (4 · fleet))`.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { sync } from '../../src/algorithms/tokenBucket.js';
import type { WindowSyncRequest, WindowSyncResult } from '../../src/algorithms/window.js';
import { MemoryStore } from '../../src/index.js';
import * as lease from '../../src/lease.js';
import type { Operation } from '../../src/stores/store.js';
import { tokenBucketSync } from '../../src/stores/tokenBucketOps.js';
import { fixedWindowSync, slidingWindowSync } from '../../src/stores/windowOps.js';

/** What happens to a call once sent: answered, or its reply lost (after it ran, or before). */
type Fate = 'answered' | 'lost-applied' | 'lost-unapplied';

/** A store reply in the lease core's terms. */
interface Reply {
  readonly allowance: number;
  readonly granted: number;
  readonly window: number;
  readonly endsAt: number;
  readonly levelBefore: number;
  readonly opensPerMs: number;
}

interface Ask {
  readonly used: number;
  readonly returned: number;
  readonly window: number;
  readonly want: number;
  /** Whether an allowance may be granted (false: a plain report and hand-back). */
  readonly allowance: boolean;
}

/** One algorithm's store side, run by a MemoryStore on the test's clock. */
interface Counter {
  readonly capacity: number;
  sync(ask: Ask): Reply;
  /** Most an exact limiter admits in the admissions' bucket `window` (bucket: the whole run). */
  exact(window: number): number;
  /** Whether admissions are bounded per window (else over the whole run). */
  readonly perWindow: boolean;
  /** Most usage a fleet's allowances hold unreported, as a fraction of the capacity. */
  readonly outstanding: number;
}

interface Instance {
  allowance: number;
  endsAt: number;
  window: number;
  unreported: number;
  spentInFlight: number;
  slice: { window: number; endsAt: number; segments: lease.Segment[] } | undefined;
  pending: { fate: Fate; late: boolean; ask: Ask; reply: Reply | undefined } | undefined;
}

const fresh = (): Instance => ({
  allowance: 0,
  endsAt: 0,
  window: 0,
  unreported: 0,
  spentInFlight: 0,
  slice: undefined,
  pending: undefined,
});

const fate = fc.constantFrom<Fate>('answered', 'answered', 'lost-applied', 'lost-unapplied');
const who = fc.nat({ max: 5 });
const action = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant('send' as const),
      who,
      /** Lease wanted, as a fraction of the capacity (0: a report only). */
      want: fc.constantFrom<number>(0, 0, 0.01, 0.1, 0.5),
      fate,
      /** The store runs it only when the reply is due (a frozen Redis), not when sent. */
      late: fc.boolean(),
    }),
  },
  { weight: 5, arbitrary: fc.record({ kind: fc.constant('deliver' as const), who }) },
  {
    weight: 10,
    arbitrary: fc.record({
      kind: fc.constant('spend' as const),
      who,
      /** A request's cost, or all that is held at once (a burst of requests). */
      cost: fc.oneof(fc.integer({ min: 1, max: 3 }), fc.constant('all' as const)),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('evict' as const), who, fate }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('crash' as const), who }) },
  {
    weight: 2,
    arbitrary: fc.record({ kind: fc.constant('advance' as const), ms: fc.integer({ min: 1, max: 400 }) }),
  },
);
type Action = typeof action extends fc.Arbitrary<infer A> ? A : never;

interface Run {
  /** Tokens admitted per bucket of admissions (a window's index; 0 for a bucket). */
  admitted: Map<number, number>;
  /** Usage lost for good (crashes, reports lost before they ran), per event. */
  losses: { window: number; tokens: number }[];
  /** Store time elapsed. */
  elapsed: number;
}

function runFleet(
  make: (now: () => number) => Counter,
  n: number,
  actions: readonly Action[],
): { run: Run; counter: Counter } {
  const clock = { t: 1_700_000_000_000 };
  const start = clock.t;
  const counter = make(() => clock.t);
  const instances = Array.from({ length: n }, fresh);
  const run: Run = { admitted: new Map(), losses: [], elapsed: 0 };
  const admit = (window: number, tokens: number) =>
    run.admitted.set(window, (run.admitted.get(window) ?? 0) + tokens);
  const lose = (window: number, tokens: number) => {
    if (tokens > 0) run.losses.push({ window, tokens });
  };

  /** The core's `#learn`: the allowance is replaced, less what was spent while the call flew. */
  const learn = (i: Instance, r: Reply) => {
    const now = clock.t;
    i.window = r.window;
    i.allowance = Math.max(0, r.allowance - i.spentInFlight);
    i.endsAt = r.endsAt;
    if (r.allowance > 0 || r.granted === 0) return;
    // Tokens of an older window are dropped (fewer admissions, never more).
    if (i.slice?.window !== r.window) i.slice = { window: r.window, endsAt: r.endsAt, segments: [] };
    i.slice.segments.push({
      at: now,
      levelBefore: r.levelBefore,
      size: r.granted,
      ratePerMs: r.opensPerMs,
      used: 0,
    });
  };

  for (const a of actions) {
    if (a.kind === 'advance') {
      clock.t += a.ms;
      continue;
    }
    const index = a.who % n;
    const i = instances[index] as Instance;
    const now = clock.t;
    if (now >= i.endsAt) i.allowance = 0;
    if (i.slice && now >= i.slice.endsAt) i.slice = undefined;
    switch (a.kind) {
      case 'spend': {
        const fromAllowance = a.cost === 'all' ? i.allowance : a.cost;
        if (fromAllowance > 0 && i.allowance >= fromAllowance) {
          i.allowance -= fromAllowance;
          i.unreported += fromAllowance;
          if (i.pending) i.spentInFlight += fromAllowance;
          admit(i.window, fromAllowance);
          if (a.cost !== 'all') break;
        }
        const slice = i.slice;
        const fromSlice = a.cost === 'all' ? (slice ? lease.available(slice.segments, now) : 0) : a.cost;
        if (slice && fromSlice > 0 && lease.take(slice.segments, now, fromSlice))
          admit(slice.window, fromSlice);
        break;
      }
      case 'send': {
        // Single-flight: one sync per instance and key at a time.
        if (i.pending) break;
        const want = Math.ceil(a.want * counter.capacity);
        const ask = { used: i.unreported, returned: 0, window: i.window, want, allowance: true };
        i.unreported = 0;
        i.spentInFlight = 0;
        const runsNow = a.fate !== 'lost-unapplied' && !a.late;
        i.pending = { fate: a.fate, late: a.late, ask, reply: runsNow ? counter.sync(ask) : undefined };
        if (a.fate === 'lost-unapplied') lose(ask.window, ask.used);
        break;
      }
      case 'deliver': {
        const p = i.pending;
        if (!p) break;
        const reply = p.late && p.fate !== 'lost-unapplied' ? counter.sync(p.ask) : p.reply;
        if (p.fate === 'answered' && reply) learn(i, reply);
        i.pending = undefined;
        i.spentInFlight = 0;
        break;
      }
      case 'evict': {
        // `returnUnused`: what the allowance admitted and the unused slice, in one report; the
        // instance then starts afresh. A sync still in flight is forgotten (its lease, if any,
        // never reaches anyone: fewer admissions), but it was sent: the store still runs it, and
        // before the report, which waits for its key's call in flight (src/stores/batcher.ts).
        if (i.pending?.late && i.pending.fate !== 'lost-unapplied') counter.sync(i.pending.ask);
        const returned = i.slice ? lease.unused(i.slice.segments) : 0;
        const ask = {
          used: i.unreported,
          returned,
          window: i.slice?.window ?? i.window,
          want: 0,
          allowance: false,
        };
        if (a.fate === 'lost-unapplied') lose(i.window, i.unreported);
        else counter.sync(ask);
        instances[index] = fresh();
        break;
      }
      case 'crash': {
        lose(i.window, i.unreported);
        if (i.pending?.late && i.pending.fate !== 'lost-unapplied') counter.sync(i.pending.ask);
        instances[index] = fresh();
        break;
      }
    }
  }
  run.elapsed = clock.t - start;
  return { run, counter };
}

const EPS = 1e-6;

function checkBound(run: Run, counter: Counter, fleet: number): { over: number } {
  const share = Math.floor((counter.capacity * counter.outstanding) / fleet);
  for (const loss of run.losses) {
    expect(loss.tokens, 'usage lost in one crash or lost report: at most one allowance').toBeLessThanOrEqual(
      share + EPS,
    );
  }
  let over = 0;
  for (const [window, admitted] of run.admitted) {
    const losses = run.losses.filter((l) => !counter.perWindow || l.window === window);
    const exact = counter.exact(window);
    const bound = exact + counter.capacity * counter.outstanding + losses.length * share;
    expect(admitted, `admitted in ${window}: exact ${exact}, ${losses.length} losses`).toBeLessThanOrEqual(
      bound + EPS,
    );
    const lostTokens = losses.reduce((sum, l) => sum + l.tokens, 0);
    over = Math.max(over, (admitted - exact - lostTokens) / counter.capacity);
  }
  return { over };
}

/**
 * Always run first: one instance spends its whole allowance (fleet 2: a quarter of a bucket, an
 * eighth of a window) while the other leases the rest, so the fleet goes over with nothing lost.
 */
const overTheLimit: Action[] = [
  { kind: 'send', who: 0, want: 0, fate: 'answered', late: false },
  { kind: 'deliver', who: 0 },
  { kind: 'spend', who: 0, cost: 'all' },
  ...Array.from({ length: 2 }, (): Action[] => [
    { kind: 'send', who: 1, want: 0.5, fate: 'answered', late: false },
    { kind: 'deliver', who: 1 },
  ]).flat(),
  { kind: 'spend', who: 1, cost: 'all' },
];
const twoOf100 = { capacity: 100, n: 2, extra: 0 };

/**
 * fast-check's counterexample to a model that dropped the report in flight at an eviction: the
 * store never counted those 5 tokens, and the next allowances were cut from a full bucket again.
 */
const reportInFlightAtEviction: Action[] = [
  { kind: 'send', who: 0, want: 0, fate: 'answered', late: false },
  { kind: 'deliver', who: 0 },
  { kind: 'spend', who: 0, cost: 'all' },
  ...Array.from({ length: 2 }, (): Action[] => [
    { kind: 'send', who: 0, want: 0, fate: 'answered', late: true },
    { kind: 'evict', who: 0, fate: 'answered' },
    { kind: 'send', who: 0, want: 0, fate: 'answered', late: false },
    { kind: 'deliver', who: 0 },
    { kind: 'spend', who: 0, cost: 'all' },
  ]).flat(),
  { kind: 'send', who: 0, want: 0.5, fate: 'answered', late: false },
  { kind: 'deliver', who: 0 },
  { kind: 'spend', who: 0, cost: 'all' },
];

const shapes = fc.record({
  capacity: fc.constantFrom(10, 37, 100, 1000),
  n: fc.integer({ min: 1, max: 6 }),
  extra: fc.constantFrom(0, 0, 1, 3),
});

describe('token bucket sync under lost calls and crashes', () => {
  it('admits at most burst + rate · elapsed + burst / 2 + one allowance per loss', () => {
    let highest = 0;
    fc.assert(
      fc.property(
        shapes,
        fc.constantFrom(0, 1, 2),
        fc.constantFrom(1000, 5000, 600_000),
        fc.array(action, { maxLength: 300, size: 'max' }),
        ({ capacity, n, extra }, aheadBursts, refillMs, actions) => {
          const burst = capacity;
          const shape = { rate: burst, periodMs: refillMs, burst };
          const fleet = n + extra;
          const ratePerMs = burst / refillMs;
          let store: MemoryStore;
          const { run, counter } = runFleet(
            (now) => {
              store = new MemoryStore({ now });
              return {
                capacity: burst,
                perWindow: false,
                outstanding: 1 / 2,
                exact: () => Number.NaN, // set below, once the run's length is known
                sync(ask) {
                  const r = store.runSync(tokenBucketSync, 'k', {
                    ...shape,
                    used: ask.used,
                    returned: ask.returned,
                    want: ask.want,
                    min: ask.want > 0 ? 1 : 0,
                    ahead: aheadBursts * burst,
                    allowance: ask.allowance ? burst : 0,
                    fleet: ask.allowance ? fleet : 0,
                    holdMs: 2000,
                    spent: 0,
                  });
                  return {
                    allowance: r.allowance,
                    granted: r.granted,
                    window: 0,
                    endsAt: Number.POSITIVE_INFINITY,
                    levelBefore: r.levelBefore,
                    opensPerMs: ratePerMs,
                  };
                },
              };
            },
            n,
            actions,
          );
          const exact = burst + ratePerMs * run.elapsed;
          const { over } = checkBound(run, { ...counter, exact: () => exact }, fleet);
          highest = Math.max(highest, over);
        },
      ),
      {
        numRuns: Number(process.env.RUNS ?? 400),
        examples: [
          [twoOf100, 0, 600_000, overTheLimit],
          [{ capacity: 10, n: 1, extra: 0 }, 0, 1000, reportInFlightAtEviction],
        ],
      },
    );
    expect(highest, 'fleets do go over the exact bucket, beyond what losses explain').toBeGreaterThan(0);
  });
});

describe.each([
  ['fixed window', fixedWindowSync],
  ['sliding window', slidingWindowSync],
] as const)('%s sync under lost calls and crashes', (_, op) => {
  const windowSync = op as unknown as Operation<unknown, WindowSyncRequest, WindowSyncResult>;

  it('admits at most limit + limit / 4 + one allowance per loss in each window', () => {
    let highest = 0;
    fc.assert(
      fc.property(
        shapes,
        fc.boolean(),
        fc.array(action, { maxLength: 300, size: 'max' }),
        ({ capacity, n, extra }, ahead, actions) => {
          const limit = capacity;
          const windowMs = 1000;
          const fleet = n + extra;
          let store: MemoryStore;
          let now: () => number;
          const { run, counter } = runFleet(
            (clock) => {
              now = clock;
              store = new MemoryStore({ now: clock });
              return {
                capacity: limit,
                perWindow: true,
                outstanding: 1 / 4,
                exact: () => limit,
                sync(ask) {
                  const r = store.runSync(windowSync, 'k', {
                    limit,
                    windowMs,
                    ahead,
                    used: ask.used,
                    returned: ask.returned,
                    window: ask.window,
                    want: ask.want,
                    min: ask.want > 0 ? 1 : 0,
                    allowance: ask.allowance ? limit : 0,
                    fleet: ask.allowance ? fleet : 0,
                  });
                  // Tokens leased ahead are spent at once here, not as they open: each fixed
                  // window's count bounds them all the same.
                  return {
                    allowance: r.allowance,
                    granted: r.granted,
                    window: r.window,
                    endsAt: now() + r.msLeft,
                    levelBefore: r.granted,
                    opensPerMs: 0,
                  };
                },
              };
            },
            n,
            actions,
          );
          highest = Math.max(highest, checkBound(run, counter, fleet).over);
        },
      ),
      { numRuns: Number(process.env.RUNS ?? 300), examples: [[twoOf100, false, overTheLimit]] },
    );
    expect(highest, 'fleets do go over the limit, beyond what losses explain').toBeGreaterThan(0);
  });
});

describe('token bucket sync: reported usage is charged in full', () => {
  const shape = { rate: 100, periodMs: 1000, burst: 100 };
  const report = (used: number) => ({
    ...shape,
    used,
    returned: 0,
    want: 0,
    min: 0,
    ahead: 0,
    allowance: 0,
    fleet: 0,
    holdMs: 0,
    spent: 0,
  });

  it('a report lands even where leases reaching ahead took the level below one burst', () => {
    const t = sync({ level: -150, ts: 0 }, 0, report(25));
    expect(t.state, 'the 25 tokens admitted under the allowance are debited').toEqual({ level: -175, ts: 0 });
  });

  it('an allowance spent while others lease ahead never goes uncounted, cycle after cycle', () => {
    // Each cycle: A takes an allowance (a quarter: fleet 2) and spends it; B leases half a burst at
    // a time until the level is a burst and a half below zero; A reports; B spends its leases as
    // they exist; the bucket refills. A report dropped at the lease floor would let every cycle
    // admit A's allowance on top of the exact bucket.
    const send = (who: number, want: number) =>
      [
        { kind: 'send', who, want, fate: 'answered', late: false },
        { kind: 'deliver', who },
      ] as const;
    const spend = (who: number) => ({ kind: 'spend', who, cost: 'all' }) as const;
    const cycle: Action[] = [
      ...send(0, 0),
      spend(0),
      ...Array.from({ length: 5 }, () => send(1, 0.5)).flat(),
      spend(1),
      ...send(0, 0),
      { kind: 'advance', ms: 1500 },
      spend(1),
      { kind: 'advance', ms: 1000 },
    ];
    let store: MemoryStore;
    const { run } = runFleet(
      (now) => {
        store = new MemoryStore({ now });
        return {
          capacity: 100,
          perWindow: false,
          outstanding: 1 / 2,
          exact: () => Number.NaN,
          sync(ask) {
            const r = store.runSync(tokenBucketSync, 'k', {
              ...shape,
              ...ask,
              min: ask.want > 0 ? 1 : 0,
              ahead: 200,
              allowance: ask.allowance ? 100 : 0,
              fleet: ask.allowance ? 2 : 0,
              holdMs: 2000,
              spent: 0,
            });
            return { ...r, window: 0, endsAt: Number.POSITIVE_INFINITY, opensPerMs: 0.1 };
          },
        };
      },
      2,
      Array.from({ length: 20 }, () => cycle).flat(),
    );
    const admitted = run.admitted.get(0) ?? 0;
    expect(run.losses).toEqual([]);
    expect(admitted, 'burst + rate · elapsed + burst / 2').toBeLessThanOrEqual(100 + 0.1 * run.elapsed + 50);
  });
});
