import { performance } from 'node:perf_hooks';
import type { Decider, Verdict } from './contestants.js';
import { STREAM_LENGTH } from './zipf.js';

export interface DriveOptions {
  /** The keys to decide on, in order (wrapping around). */
  readonly stream: readonly string[];
  readonly durationMs: number;
  /** Requests in flight at once; 1 drives a plain `await` loop. */
  readonly concurrency: number;
  /** Call `decide` without `await` in a synchronous loop (only for a synchronous decider). */
  readonly sync?: boolean | undefined;
}

export interface DriveResult {
  readonly decisions: number;
  readonly allowed: number;
  /** Decisions that rejected (e.g. a store timeout) instead of answering. */
  readonly errors: number;
  readonly elapsedMs: number;
  readonly perSecond: number;
  /** Decisions per second of this process's CPU time: steadier than wall time on a shared machine. */
  readonly perCpuSecond: number;
}

const MASK = STREAM_LENGTH - 1;
/**
 * Decisions between clock reads: reading the clock on every decision would be a large part of the
 * floor, but with many workers in flight a long batch would overrun the round's end.
 */
const BATCH = 128;
const CONCURRENT_BATCH = 8;
/**
 * Decisions answered from memory resolve as microtasks and never give the event loop a turn. A
 * gateway's loop handles I/O between requests, and so must this one: otherwise replies to other
 * contestants' background Redis calls would sit unread until their timeouts fire.
 */
const YIELD_EVERY_MS = 5;

/** Closed-loop load: each of `concurrency` workers decides, waits for the answer, decides again. */
export async function drive(decider: Decider, opts: DriveOptions): Promise<DriveResult> {
  const { stream } = opts;
  if (stream.length !== STREAM_LENGTH) throw new Error(`key stream must have ${STREAM_LENGTH} entries`);
  let next = 0;
  let decisions = 0;
  let allowed = 0;
  let errors = 0;
  const cpu = process.cpuUsage();
  const start = performance.now();
  const end = start + opts.durationMs;
  let yieldAt = start + YIELD_EVERY_MS;
  let pause: Promise<void> | undefined;
  // Every worker waits on the same pause, so the microtask queue drains and the loop really turns.
  const turn = (now: number) => {
    if (now < yieldAt) return undefined;
    pause ??= new Promise<void>((resolve) => setImmediate(resolve)).then(() => {
      pause = undefined;
      yieldAt = performance.now() + YIELD_EVERY_MS;
    });
    return pause;
  };

  if (opts.sync) {
    const decide = decider.decide as (key: string) => Verdict;
    for (let now = start; now < end; now = performance.now()) {
      await turn(now);
      for (let i = 0; i < BATCH; i++) if (decide(stream[next++ & MASK] as string).allowed) allowed++;
      decisions += BATCH;
    }
  } else {
    const batch = opts.concurrency > 1 ? CONCURRENT_BATCH : BATCH;
    const worker = async () => {
      for (let now = start; now < end; now = performance.now()) {
        await turn(now);
        for (let i = 0; i < batch; i++) {
          try {
            if ((await decider.decide(stream[next++ & MASK] as string)).allowed) allowed++;
          } catch {
            errors++;
          }
        }
        decisions += batch;
      }
    };
    await Promise.all(Array.from({ length: opts.concurrency }, worker));
  }
  const elapsedMs = performance.now() - start;
  const used = process.cpuUsage(cpu);
  const cpuSeconds = (used.user + used.system) / 1e6;
  return {
    decisions,
    allowed,
    errors,
    elapsedMs,
    perSecond: (decisions / elapsedMs) * 1000,
    perCpuSecond: decisions / cpuSeconds,
  };
}
