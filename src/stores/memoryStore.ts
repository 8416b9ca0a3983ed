import { clockOption } from '../duration.js';
import { ClosedError, ConfigError } from '../errors.js';
import { isOptionsObject, knownOptions } from '../options.js';
import type { Operation, Store } from './store.js';

const MEMORY_STORE_OPTIONS: readonly (keyof MemoryStoreOptions)[] = ['now'];

export interface MemoryStoreOptions {
  /**
   * Clock in ms. The simulator passes a virtual one.
   * @default Date.now
   */
  now?: () => number;
}

interface Entry {
  state: unknown;
  expiresAt: number;
}

/** Expired entries are swept after this many operations, so unique-key floods cannot grow the map. */
const SWEEP_EVERY = 4096;

/**
 * The store semantics in-process: the embedded default and the shared "Redis" of the simulator.
 * One instance may be shared by any number of `Limiter`s in the same process. Operations apply
 * synchronously, so each one is atomic.
 */
export class MemoryStore implements Store {
  readonly #now: () => number;
  readonly #entries = new Map<string, Entry>();
  #ops = 0;
  #closed = false;

  constructor(options: MemoryStoreOptions = {}) {
    if (!isOptionsObject(options)) {
      throw new ConfigError('options', 'expected an object { now? }');
    }
    knownOptions(options, MEMORY_STORE_OPTIONS);
    this.#now = clockOption(options.now) ?? Date.now;
  }

  /** Number of live keys (for tests and memory accounting). */
  get size(): number {
    return this.#entries.size;
  }

  async run<S, Req, Res>(op: Operation<S, Req, Res>, key: string, req: Req): Promise<Res> {
    return this.runSync(op, key, req);
  }

  /** `run` without the promise, for callers (the simulator) that model latency themselves. */
  runSync<S, Req, Res>(op: Operation<S, Req, Res>, key: string, req: Req): Res {
    if (this.#closed) throw new ClosedError('MemoryStore');
    const now = this.#now();
    if (++this.#ops % SWEEP_EVERY === 0) this.#sweep(now);
    let entry = this.#entries.get(key);
    if (entry && entry.expiresAt <= now) {
      this.#entries.delete(key);
      entry = undefined;
    }
    const previous = entry?.state as S | undefined;
    const transition = op.apply(previous, now, req);
    if (transition.state !== previous) {
      if (transition.state === undefined) this.#entries.delete(key);
      else this.#entries.set(key, { state: transition.state, expiresAt: now + transition.ttlMs });
    }
    return transition.result;
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#entries.clear();
  }

  #sweep(now: number): void {
    for (const [key, entry] of this.#entries) if (entry.expiresAt <= now) this.#entries.delete(key);
  }
}
