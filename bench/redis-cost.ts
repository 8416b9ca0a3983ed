import { setTimeout as sleep } from 'node:timers/promises';
import { contestant, describeCounters } from './contestants.js';
import { type BenchContext, forEachLimited } from './context.js';
import { drive } from './driver.js';
import { commandDelta, connect, disconnect, readCounters } from './redis.js';
import { type BenchOutput, type Row, si, type TargetCheck } from './report.js';
import { keySets } from './zipf.js';

/** tokenlease must send at least this many times fewer commands per decision than rate-limiter-flexible. */
const COMMAND_TARGET = 20;
const OURS = 'tokenlease-redis';

/** Everything per 1000 decisions. */
interface Cost {
  readonly decisions: number;
  /** Every command Redis executed, those run inside scripts included. */
  readonly commands: number;
  /** EVAL/EVALSHA calls: network round trips. */
  readonly roundTrips: number;
  readonly cpuMs: number;
  readonly netBytes: number;
  readonly detail: string;
}

const METRICS = [
  { unit: 'commands', of: (c: Cost) => c.commands },
  { unit: 'ms Redis CPU', of: (c: Cost) => c.cpuMs },
] as const;

function ratioText(theirs: number, ours: number, unit: string): string {
  // Redis CPU below its own idle noise reads as 0 after the idle share is subtracted.
  if (ours === 0) return theirs === 0 ? '' : unit === 'commands' ? 'tokenlease: none' : 'tokenlease: ≈ idle';
  return `${si(theirs / ours)}× tokenlease`;
}

/**
 * Redis commands, CPU and network per 1000 decisions at steady state (limits never reached), read
 * from INFO deltas around a closed-loop run. Redis's own idle CPU over the same time is subtracted.
 */
export async function runRedisCost(ctx: BenchContext): Promise<BenchOutput> {
  const { profile } = ctx;
  const rows: Row[] = [];
  const observer = await connect(ctx.redis.url);
  const ratios: string[] = [];
  let met: boolean | undefined;
  try {
    const idleBefore = await readCounters(observer);
    const idleStart = performance.now();
    await sleep(Math.min(profile.cost.ms, 1000));
    const idleAfter = await readCounters(observer);
    const idleCpuPerMs = (idleAfter.cpuMs - idleBefore.cpuMs) / (performance.now() - idleStart);

    for (const [k, keys] of keySets(profile.zipfKeys).entries()) {
      const costs = new Map<string, Cost>();
      for (const id of profile.cost.contestants) {
        const c = contestant(id);
        ctx.log(`redis cost: ${c.label}, ${keys.name}`);
        const decider = await c.create('hit', {
          redisUrl: ctx.redis.url,
          prefix: `${ctx.runId}:cost:${k}:${id}:`,
        });
        const load = { stream: keys.stream, concurrency: profile.redisConcurrency };
        try {
          const failed = await forEachLimited(keys.distinct, profile.redisConcurrency, (key) =>
            decider.decide(key),
          );
          if (failed > 0) ctx.log(`redis cost: ${failed} warm-up decisions failed`);
          await drive(decider, { ...load, durationMs: profile.cost.warmMs });
          const ownBefore = decider.counters?.();
          const before = await readCounters(observer);
          const r = await drive(decider, { ...load, durationMs: profile.cost.ms });
          const after = await readCounters(observer);
          const ownAfter = decider.counters?.();
          const cmds = commandDelta(before, after);
          const per = 1000 / r.decisions;
          const byName = [...cmds.byName]
            .sort((a, b) => b[1] - a[1])
            .map(([name, n]) => `${name} ${(n * per).toPrecision(3)}`)
            .join(', ');
          costs.set(id, {
            decisions: r.decisions,
            commands: cmds.total * per,
            roundTrips: cmds.scripts * per,
            cpuMs: Math.max(0, after.cpuMs - before.cpuMs - idleCpuPerMs * r.elapsedMs) * per,
            netBytes: (after.netInBytes - before.netInBytes + after.netOutBytes - before.netOutBytes) * per,
            detail: [
              byName || 'no commands',
              ownBefore && ownAfter ? describeCounters(ownBefore, ownAfter) : '',
              r.errors > 0 ? `${r.errors} errors` : '',
            ]
              .filter(Boolean)
              .join('; '),
          });
        } finally {
          await decider.close();
        }
      }

      const ours = costs.get(OURS);
      for (const [id, cost] of costs) {
        for (const m of METRICS) {
          rows.push({
            bench: 'redis cost',
            case: `per 1000 decisions, ${keys.name}`,
            contestant: contestant(id).label,
            value: `${m.of(cost).toPrecision(3)} ${m.unit}`,
            spread: '',
            vs: ours && id !== OURS ? ratioText(m.of(cost), m.of(ours), m.unit) : '',
            note:
              m.unit === 'commands'
                ? `${cost.roundTrips.toPrecision(3)} round trips, ${si(cost.netBytes)}B network; ${cost.detail}`
                : `${si(cost.decisions)} decisions measured; used_cpu_sys+user, idle subtracted`,
          });
        }
      }
      const rlf = costs.get('rlf-redis');
      if (ours && rlf) {
        const ratio = rlf.commands / ours.commands;
        ratios.push(`${keys.name}: ${Number.isFinite(ratio) ? `${si(ratio)}×` : '∞ (tokenlease sent none)'}`);
        met = (met ?? true) && ratio >= COMMAND_TARGET;
      }
    }
  } finally {
    await disconnect(observer);
  }
  const targets: TargetCheck[] = [
    {
      target: `≥ ${COMMAND_TARGET}× fewer Redis commands per decision than rate-limiter-flexible's Redis limiter`,
      measured: ratios.length > 0 ? `rate-limiter-flexible ÷ tokenlease commands: ${ratios.join('; ')}` : '',
      met,
    },
  ];
  return { rows, targets };
}
