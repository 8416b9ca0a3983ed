import {
  type Contestant,
  type Counters,
  contestant,
  type Decider,
  describeCounters,
  type Scenario,
} from './contestants.js';
import { type BenchContext, forEachLimited } from './context.js';
import { drive } from './driver.js';
import { type BenchOutput, percentSpread, type Row, si, type TargetCheck } from './report.js';
import { median, summarize } from './stats.js';
import { type KeySet, keySets, SINGLE_KEY } from './zipf.js';

const CASES: Record<Scenario, string> = {
  hit: 'lease hit',
  miss: 'lease miss',
  denied: 'denied, answered locally',
  multi: 'multi-rule (2 rules)',
  'per-key-100': '100/s, burst 100 per key',
};

/** The contestant every other one is compared to: the Map bucket driven like the rest (awaited). */
const FLOOR = 'map';
/**
 * Issue 16's targets for tokenlease on a MemoryStore: decisions/s at least 1/N of the floor's, i.e.
 * cost per decision at most N× the floor's.
 */
const TARGETS: readonly { scenario: Scenario; zipf: boolean; maxCost: number }[] = [
  { scenario: 'hit', zipf: false, maxCost: 2 },
  { scenario: 'hit', zipf: true, maxCost: 3 },
  { scenario: 'multi', zipf: false, maxCost: 4 },
  { scenario: 'multi', zipf: true, maxCost: 4 },
];
const OURS = 'tokenlease-memory';

interface Entrant {
  readonly contestant: Contestant;
  readonly decider: Decider;
  readonly concurrency: number;
  readonly rates: number[];
  readonly cpuRates: number[];
  decisions: number;
  allowed: number;
  errors: number;
  counters?: { before: Counters; after: Counters };
}

/** Returns the number of failed warm-up decisions. */
async function warm(e: Entrant, keys: KeySet, scenario: Scenario, warmMs: number): Promise<number> {
  // A denied key must have spent its one token before timing starts (the first decision passes).
  const touches = scenario === 'denied' ? 2 : 0;
  let failed = 0;
  for (let t = 0; t < touches; t++) {
    failed += await forEachLimited(keys.distinct, e.concurrency, (key) => e.decider.decide(key));
  }
  const r = await drive(e.decider, {
    stream: keys.stream,
    durationMs: warmMs,
    concurrency: e.concurrency,
    sync: e.contestant.sync,
  });
  return failed + r.errors;
}

function expectedAllowed(scenario: Scenario): number {
  return scenario === 'denied' ? 0 : 1;
}

/** Runs one case: every contestant warmed up, then `rounds` rounds taking turns. */
async function measureCase(
  ctx: BenchContext,
  scenario: Scenario,
  k: number,
  keys: KeySet,
): Promise<Entrant[]> {
  const { profile } = ctx;
  const entrants: Entrant[] = [];
  try {
    for (const id of profile.micro.contestants) {
      const c = contestant(id);
      const decider = await c.create(scenario, {
        redisUrl: ctx.redis.url,
        prefix: `${ctx.runId}:micro:${scenario}:${k}:${id}:`,
      });
      entrants.push({
        contestant: c,
        decider,
        concurrency: c.redis ? profile.redisConcurrency : 1,
        rates: [],
        cpuRates: [],
        decisions: 0,
        allowed: 0,
        errors: 0,
      });
    }
    for (const e of entrants) {
      const warmMs = keys.distinct.length > 1 ? profile.micro.manyKeysWarmMs : profile.micro.warmMs;
      const failed = await warm(e, keys, scenario, warmMs);
      if (failed > 0) ctx.log(`micro: ${failed} warm-up decisions of ${e.contestant.label} failed`);
    }
    for (const e of entrants) {
      const before = e.decider.counters?.();
      if (before) e.counters = { before, after: before };
    }
    for (let round = 0; round < profile.rounds; round++) {
      // Rotating the order spreads slow moments of a shared machine over all contestants.
      for (let i = 0; i < entrants.length; i++) {
        const e = entrants[(i + round) % entrants.length] as Entrant;
        const r = await drive(e.decider, {
          stream: keys.stream,
          durationMs: profile.micro.roundMs,
          concurrency: e.concurrency,
          sync: e.contestant.sync,
        });
        e.rates.push(r.perSecond);
        e.cpuRates.push(r.perCpuSecond);
        e.decisions += r.decisions;
        e.allowed += r.allowed;
        e.errors += r.errors;
      }
    }
    for (const e of entrants) {
      const after = e.decider.counters?.();
      if (after && e.counters) e.counters.after = after;
    }
  } finally {
    await Promise.all(entrants.map((e) => e.decider.close()));
  }
  return entrants;
}

interface Cost {
  readonly scenario: Scenario;
  readonly keys: string;
  readonly wall: number;
  readonly cpu: number;
}

interface CaseResult {
  readonly rows: Row[];
  /** tokenlease MemoryStore's cost relative to the floor. */
  readonly cost?: Cost;
}

function caseRows(
  ctx: BenchContext,
  scenario: Scenario,
  keys: KeySet,
  entrants: readonly Entrant[],
): CaseResult {
  const label = `${CASES[scenario]}, ${keys.name}`;
  const floorEntrant = entrants.find((e) => e.contestant.id === FLOOR);
  const floor = floorEntrant ? summarize(floorEntrant.rates) : undefined;
  const rows: Row[] = [];
  let ours: Cost | undefined;
  for (const e of entrants) {
    const s = summarize(e.rates);
    const cost = floor ? floor.median / s.median : Number.NaN;
    // Redis's share of the work is not this process's CPU time, so only in-process ones compare.
    const cpuCost =
      floorEntrant && !e.contestant.redis ? median(floorEntrant.cpuRates) / median(e.cpuRates) : Number.NaN;
    const notes: string[] = [];
    if (e.contestant.redis) notes.push(`${ctx.profile.redisConcurrency} in flight`);
    if (e.contestant.id !== FLOOR && Number.isFinite(cpuCost))
      notes.push(`${cpuCost.toFixed(2)}× floor CPU time`);
    if (e.counters) {
      notes.push(
        describeCounters(e.counters.before, e.counters.after, scenario === 'multi' ? 'rule' : 'decision'),
      );
    }
    if (e.errors > 0) notes.push(`${e.errors} errors`);
    const allowedShare = e.decisions === 0 ? Number.NaN : e.allowed / e.decisions;
    if (Math.abs(allowedShare - expectedAllowed(scenario)) > 1e-9) {
      notes.push(`${(100 * allowedShare).toFixed(2)}% allowed`);
    }
    rows.push({
      bench: 'micro',
      case: label,
      contestant: e.contestant.label,
      value: `${si(s.median)} decisions/s`,
      spread: percentSpread(s),
      vs: floor ? (e.contestant.id === FLOOR ? 'floor' : `${cost.toFixed(2)}× floor cost`) : '',
      note: notes.filter(Boolean).join('; '),
    });
    if (e.contestant.id === OURS && floor) ours = { scenario, keys: keys.name, wall: cost, cpu: cpuCost };
  }
  return ours ? { rows, cost: ours } : { rows };
}

/** Decisions per second in one process, per scenario and key set, all contestants in the same rounds. */
export async function runMicro(ctx: BenchContext): Promise<BenchOutput> {
  const rows: Row[] = [];
  const costs: Cost[] = [];
  for (const scenario of ctx.profile.micro.scenarios) {
    for (const [k, keys] of keySets(ctx.profile.zipfKeys).entries()) {
      ctx.log(`micro: ${CASES[scenario]}, ${keys.name}`);
      const result = caseRows(ctx, scenario, keys, await measureCase(ctx, scenario, k, keys));
      rows.push(...result.rows);
      if (result.cost) costs.push(result.cost);
    }
  }
  const targets: TargetCheck[] = TARGETS.map((t) => {
    const c = costs.find((x) => x.scenario === t.scenario && (x.keys !== SINGLE_KEY) === t.zipf);
    return {
      target: `tokenlease MemoryStore, ${CASES[t.scenario]}, ${t.zipf ? 'Zipf keys' : SINGLE_KEY}: ≥ 1/${t.maxCost} of the awaited Map floor's decisions/s`,
      measured: c
        ? `${(1 / c.cpu).toFixed(2)} of the floor by CPU time (${c.cpu.toFixed(2)}× its cost; wall time ${c.wall.toFixed(2)}×)`
        : '',
      // CPU time: other processes on a shared machine stretch wall time, not the work done.
      met: c ? (Number.isFinite(c.cpu) ? c.cpu : c.wall) <= t.maxCost : undefined,
    };
  });
  return { rows, targets };
}
