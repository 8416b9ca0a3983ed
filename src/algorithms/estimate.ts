/**
 * What every algorithm's read-only operation answers (`Limiter.peek`): what a request of cost 1
 * would see now. A read never writes: the state is returned as it came, so no key is created,
 * extended or trimmed.
 */
import type { Transition } from './transition.js';

export interface Estimate {
  /** Room left now, unrounded (the limiter floors and clamps it). */
  readonly remaining: number;
  /** Ms until the key is back to its full limit if nothing more is taken; 0 when it is. */
  readonly resetMs: number;
  /** 0 when a cost of 1 would pass now, else ms until it would if nothing else changes. */
  readonly retryMs: number;
}

/** The transition of a read: the state unchanged (same reference, so `MemoryStore` writes nothing). */
export function unchanged<S>(state: S | undefined, result: Estimate): Transition<S, Estimate> {
  return { state, ttlMs: 0, result };
}
