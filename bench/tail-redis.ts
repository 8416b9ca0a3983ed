/**
 * Issue 11's Redis cases, every figure read from the server: decisions/s next to the awaited Map
 * floor in the same rounds, Redis commands (inner ones counted), round trips and Redis CPU per
 * decision.
 * - `tail-redis`: one instance, 10k Zipf keys, a bucket that never refuses, at 1, 16 and 256 calls
 *   in flight; and one hot key.
 * - `fleet-redis`: 8 instances with their own connections on one redis-server, 10k Zipf keys,
 *   100/s with a burst of 100 per key, requests spread round-robin over the instances.
 */
import { type Contestant, contestant, DENY, type Decider, type Scenario } from './contestants.js';
import type { BenchContext } from './context.js';
import { drive } from './driver.js';
import { pin, REDIS_CPU } from './pin.js';
import { connect, disconnect, openRedis } from './redis.js';
import { RedisCost, RedisMeter } from './redis-meter.js';
import { type BenchOutput, percentSpread, type Row, si, type TargetCheck } from './report.js';
import { summarize } from './stats.js';
import { type KeySet, keySets, SINGLE_KEY } from './zipf.js';

const FLOOR = 'map';
const OURS = 'tokenlease-redis';
const PEER = 'rlf-redis';
/** Issue 11's targets. */
const TAIL = { floorShare: 1 / 4, commands: 0.1, roundTrips: 0.01 };
const FLEET = { commands: 0.25, roundTrips: 0.02 };

interface Entrant {
  readonly contestant: Contestant;
  decider: Decider;
  readonly place: Place | undefined;
  readonly rates: number[];
  readonly cost: RedisCost;
  allowed: number;
  errors: number;
}

/** Several instances of one contestant behind one decider, each decision to the next instance. */
function roundRobin(deciders: readonly Decider[]): Decider {
  let next = 0;
  const n = deciders.length;
  return {
    decide: (key) => (deciders[next++ % n] as Decider).decide(key),
    roundTrips: () => deciders.reduce((sum, d) => sum + (d.roundTrips?.() ?? 0), 0),
    close: async () => {
      await Promise.all(deciders.map((d) => d.close()));
    },
  };
}

interface CaseSpec {
  readonly label: string;
  readonly scenario: Scenario;
  readonly keys: KeySet;
  readonly concurrency: number;
  readonly instances: number;
  readonly contestants: readonly string[];
  readonly rounds: number;
  readonly roundMs: number;
  readonly warmMs: number;
  /** Redis's idle CPU is calibrated over this long on each contestant's server. */
  readonly idleMs: number;
}

/**
 * Where one contestant's Redis work is counted. With a bench-owned server every Redis contestant
 * gets a redis-server of its own: a limiter's background work (refill-ahead, write-behind reports,
 * heartbeats) goes on while the others take their turn, and on a shared server it would be counted
 * to them. Given a server by URL (the smoke test), all share it.
 */
interface Place {
  readonly url: string;
  readonly meter: RedisMeter;
  close(): Promise<void>;
}

async function placeFor(ctx: BenchContext, idleMs: number): Promise<Place> {
  const server = ctx.redis.owned ? await openRedis(undefined) : undefined;
  if (server?.pid !== undefined && ctx.pinned) pin(server.pid, REDIS_CPU);
  const url = server?.url ?? ctx.redis.url;
  const observer = await connect(url);
  try {
    const meter = await RedisMeter.open(observer, idleMs);
    return {
      url,
      meter,
      close: async () => {
        await disconnect(observer);
        await server?.stop();
      },
    };
  } catch (err) {
    await disconnect(observer);
    await server?.stop();
    throw err;
  }
}

async function measure(ctx: BenchContext, spec: CaseSpec): Promise<Entrant[]> {
  const entrants: Entrant[] = [];
  try {
    for (const id of spec.contestants) {
      const c = contestant(id);
      const place = c.redis ? await placeFor(ctx, spec.idleMs) : undefined;
      const deciders: Decider[] = [];
      const entrant: Entrant = {
        contestant: c,
        decider: { decide: () => DENY, close: async () => {} },
        place,
        rates: [],
        cost: new RedisCost(),
        allowed: 0,
        errors: 0,
      };
      entrants.push(entrant);
      for (let i = 0; i < (c.redis ? spec.instances : 1); i++) {
        deciders.push(
          await c.create(spec.scenario, {
            redisUrl: place?.url ?? ctx.redis.url,
            prefix: `${ctx.runId}:tail:${spec.label}:${id}:`,
          }),
        );
      }
      entrant.decider = deciders.length === 1 ? (deciders[0] as Decider) : roundRobin(deciders);
    }
    const load = (e: Entrant, durationMs: number) =>
      drive(e.decider, { stream: spec.keys.stream, durationMs, concurrency: spec.concurrency });
    for (const e of entrants) {
      const r = await load(e, spec.warmMs);
      if (r.errors > 0)
        ctx.log(`${spec.label}: ${r.errors} warm-up decisions of ${e.contestant.label} failed`);
    }
    for (let round = 0; round < spec.rounds; round++) {
      for (let i = 0; i < entrants.length; i++) {
        const e = entrants[(i + round) % entrants.length] as Entrant;
        const run = () => load(e, spec.roundMs);
        const r = e.place ? await e.place.meter.measure(e.cost, e.decider.roundTrips, run) : await run();
        e.rates.push(r.perSecond);
        e.allowed += r.allowed;
        e.errors += r.errors;
      }
    }
  } finally {
    await Promise.all(entrants.map((e) => e.decider.close()));
    await Promise.all(entrants.map((e) => e.place?.close()));
  }
  return entrants;
}

function costNote(c: RedisCost): string {
  return [
    `${c.perDecision(c.roundTrips).toPrecision(2)} round trips (client writes)`,
    `${c.perDecision(c.scripts).toPrecision(2)} script calls`,
    `Redis CPU ${(1000 * c.perDecision(c.cpuMs)).toPrecision(3)} ms/1000 decisions (cmdstat usec ${c.perDecision(c.usec).toPrecision(3)} ms/1000)`,
    c.detail(),
  ]
    .filter(Boolean)
    .join('; ');
}

interface CaseFigures {
  readonly rows: Row[];
  readonly ours?: { share: number; commands: number; roundTrips: number };
}

function caseRows(bench: string, spec: CaseSpec, entrants: readonly Entrant[]): CaseFigures {
  const floorEntrant = entrants.find((e) => e.contestant.id === FLOOR);
  const floor = floorEntrant ? summarize(floorEntrant.rates).median : Number.NaN;
  const peer = entrants.find((e) => e.contestant.id === PEER)?.cost;
  const rows: Row[] = [];
  let ours: CaseFigures['ours'];
  for (const e of entrants) {
    const s = summarize(e.rates);
    const share = s.median / floor;
    const allowed = e.cost.decisions === 0 ? 1 : e.allowed / e.cost.decisions;
    rows.push({
      bench,
      case: `${spec.label}: decisions/s`,
      contestant: e.contestant.label,
      value: `${si(s.median)} decisions/s`,
      spread: percentSpread(s),
      vs:
        e.contestant.id === FLOOR
          ? 'floor'
          : Number.isFinite(share)
            ? `${share.toPrecision(2)} of floor`
            : '',
      note: [
        spec.instances > 1 && e.contestant.redis ? `${spec.instances} instances` : '',
        allowed < 1 ? `${(100 * allowed).toFixed(1)}% allowed` : '',
        e.errors > 0 ? `${e.errors} errors` : '',
      ]
        .filter(Boolean)
        .join('; '),
    });
    if (!e.contestant.redis) continue;
    const commands = e.cost.perDecision(e.cost.commands);
    const peerCommands = peer ? peer.perDecision(peer.commands) : Number.NaN;
    rows.push({
      bench,
      case: `${spec.label}: Redis per decision`,
      contestant: e.contestant.label,
      value: `${commands.toPrecision(3)} commands`,
      spread: '',
      vs:
        e.contestant.id !== PEER && Number.isFinite(peerCommands) && commands > 0
          ? `${si(peerCommands / commands)}× fewer than rate-limiter-flexible`
          : '',
      note: costNote(e.cost),
    });
    if (e.contestant.id === OURS) {
      ours = { share, commands, roundTrips: e.cost.perDecision(e.cost.roundTrips) };
    }
  }
  return ours ? { rows, ours } : { rows };
}

export async function runTailRedis(ctx: BenchContext): Promise<BenchOutput> {
  const { tail } = ctx.profile;
  const [hot, zipf] = keySets(ctx.profile.zipfKeys) as [KeySet, KeySet];
  const timing = { rounds: tail.rounds, roundMs: tail.roundMs, warmMs: tail.warmMs, idleMs: tail.idleMs };
  const one = { scenario: 'hit' as const, instances: 1, contestants: tail.contestants, ...timing };
  const specs: CaseSpec[] = [
    ...tail.concurrency.map((concurrency) => ({
      ...one,
      label: `1 instance, ${zipf.name}, ${concurrency} in flight`,
      keys: zipf,
      concurrency,
    })),
    {
      ...one,
      label: `1 instance, ${SINGLE_KEY} (hot), ${tail.hotConcurrency} in flight`,
      keys: hot,
      concurrency: tail.hotConcurrency,
    },
  ];
  const rows: Row[] = [];
  const targets: TargetCheck[] = [];
  for (const spec of specs) {
    ctx.log(`tail-redis: ${spec.label}`);
    const fig = caseRows('tail-redis', spec, await measure(ctx, spec));
    rows.push(...fig.rows);
    if (spec.keys === hot || !fig.ours) continue;
    const o = fig.ours;
    targets.push({
      target: `tail, ${spec.label}: ≥ 1/4 of the Map floor, ≤ ${TAIL.commands} commands and ≤ ${TAIL.roundTrips} round trips per decision`,
      measured: `${o.share.toPrecision(2)} of the floor; ${o.commands.toPrecision(2)} commands; ${o.roundTrips.toPrecision(2)} round trips`,
      met: o.share >= TAIL.floorShare && o.commands <= TAIL.commands && o.roundTrips <= TAIL.roundTrips,
    });
  }
  return { rows, targets };
}

export async function runFleetRedis(ctx: BenchContext): Promise<BenchOutput> {
  const { fleet } = ctx.profile;
  const zipf = keySets(ctx.profile.zipfKeys)[1] as KeySet;
  const spec: CaseSpec = {
    label: `${fleet.instances} instances, ${zipf.name}, 100/s burst 100 per key, ${fleet.concurrency} in flight`,
    scenario: 'per-key-100',
    keys: zipf,
    instances: fleet.instances,
    concurrency: fleet.concurrency,
    contestants: fleet.contestants,
    rounds: fleet.rounds,
    roundMs: fleet.roundMs,
    warmMs: fleet.warmMs,
    idleMs: fleet.idleMs,
  };
  ctx.log(`fleet-redis: ${spec.label}`);
  const fig = caseRows('fleet-redis', spec, await measure(ctx, spec));
  const o = fig.ours;
  return {
    rows: fig.rows,
    targets: [
      {
        target: `fleet, ${spec.label}: ≤ ${FLEET.commands} commands and ≤ ${FLEET.roundTrips} round trips per decision`,
        measured: o
          ? `${o.commands.toPrecision(2)} commands; ${o.roundTrips.toPrecision(2)} round trips`
          : '',
        met: o ? o.commands <= FLEET.commands && o.roundTrips <= FLEET.roundTrips : undefined,
      },
    ],
  };
}
