import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { commandDelta, readCounters } from './redis.js';

/**
 * Time given to a limiter after its load stops, inside the measured window, so store calls it
 * started or deferred (refill-ahead, batched write-behind) are counted to it and not to the next.
 */
const SETTLE_MS = 50;

/** What Redis did for one contestant over measured windows, read from the server (INFO). */
export class RedisCost {
  decisions = 0;
  /** Every command executed, those run inside scripts included (commandstats calls). */
  commands = 0;
  /** EVAL/EVALSHA/FCALL calls. */
  scripts = 0;
  /** Requests the contestant's clients wrote (a pipeline counts once). */
  roundTrips = 0;
  /** used_cpu_sys + used_cpu_user, Redis's idle share over the window subtracted. */
  cpuMs = 0;
  /** commandstats usec of the top-level commands. */
  usec = 0;
  readonly byName = new Map<string, number>();

  perDecision(n: number): number {
    return this.decisions === 0 ? Number.NaN : n / this.decisions;
  }

  /** "evalsha 0.012, hmget 0.012, …" per decision. */
  detail(): string {
    return [...this.byName]
      .sort((a, b) => b[1] - a[1])
      .slice(0, 6)
      .map(([name, n]) => `${name} ${this.perDecision(n).toPrecision(2)}`)
      .join(', ');
  }
}

/** Reads Redis's counters around measured windows through its own connection. */
export class RedisMeter {
  readonly #observer: Redis;
  readonly #idleCpuPerMs: number;

  private constructor(observer: Redis, idleCpuPerMs: number) {
    this.#observer = observer;
    this.#idleCpuPerMs = idleCpuPerMs;
  }

  /** Calibrates Redis's idle CPU (serverCron and friends) over `idleMs` first. */
  static async open(observer: Redis, idleMs: number): Promise<RedisMeter> {
    const before = await readCounters(observer);
    const start = performance.now();
    await sleep(idleMs);
    const after = await readCounters(observer);
    return new RedisMeter(observer, (after.cpuMs - before.cpuMs) / (performance.now() - start));
  }

  /**
   * Runs `load` (which returns its decision count), waits for the limiter to settle and adds what
   * Redis did meanwhile to `into`. `roundTrips` reads the contestant's client-side write count.
   */
  async measure<T extends { decisions: number }>(
    into: RedisCost,
    roundTrips: (() => number) | undefined,
    load: () => Promise<T>,
  ): Promise<T> {
    const before = await readCounters(this.#observer);
    const rt0 = roundTrips?.() ?? 0;
    const start = performance.now();
    const result = await load();
    await sleep(SETTLE_MS);
    const rt1 = roundTrips?.() ?? 0;
    const elapsed = performance.now() - start;
    const after = await readCounters(this.#observer);
    const d = commandDelta(before, after);
    into.decisions += result.decisions;
    into.commands += d.total;
    into.scripts += d.scripts;
    into.roundTrips += rt1 - rt0;
    into.usec += d.usec;
    into.cpuMs += Math.max(0, after.cpuMs - before.cpuMs - this.#idleCpuPerMs * elapsed);
    for (const [name, n] of d.byName) into.byName.set(name, (into.byName.get(name) ?? 0) + n);
    return result;
  }
}
