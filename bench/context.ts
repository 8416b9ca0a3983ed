import type { Profile } from './profile.js';
import type { BenchRedis } from './redis.js';

export interface BenchContext {
  readonly profile: Profile;
  readonly redis: BenchRedis;
  /** Unique per run: every Redis key the benches write starts with it (the server may be shared). */
  readonly runId: string;
  /** Node runs on NODE_CPU and (when the bench owns it) redis-server on REDIS_CPU. */
  readonly pinned: boolean;
  /**
   * HTTP servers get NODE_CPU to themselves, the load generator moves to REDIS_CPU. Only on a
   * quiet machine: with other load, a server held to one CPU measured its CPU per request up to
   * ten times higher and erratic, unpinned it stayed steady.
   */
  readonly pinHttp: boolean;
  /** Progress, to stderr: stdout carries only the table. */
  log(message: string): void;
}

/**
 * Runs `fn` over `items` with at most `concurrency` calls in flight (warm-ups). Returns how many
 * calls failed: a warm-up failure (a store timeout on a busy machine) only means a colder start.
 */
export async function forEachLimited<T>(
  items: readonly T[],
  concurrency: number,
  fn: (item: T) => unknown,
): Promise<number> {
  let next = 0;
  let failed = 0;
  const worker = async () => {
    while (next < items.length) {
      try {
        await fn(items[next++] as T);
      } catch {
        failed++;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(concurrency, items.length)) }, worker));
  return failed;
}
