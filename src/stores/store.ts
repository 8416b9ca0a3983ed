import type { Transition } from '../algorithms/transition.js';

/**
 * One atomic operation on the state stored under one key. Each algorithm defines its operations
 * once: `apply` is the pure semantics (run in-process by `MemoryStore`), `script` names the Lua
 * port in `lua/` (run by `RedisStore`). A model-based test keeps the two identical.
 */
export interface Operation<S, Req, Res> {
  /** File in `lua/` without `.lua`; its ARGV is `args(req)` followed by the explicit clock or ''. */
  readonly script: string;
  apply(state: S | undefined, now: number, req: Req): Transition<S, Res>;
  args(req: Req): readonly (string | number)[];
  /** Turns the script's reply into the same value `apply` returns as `result`. */
  parse(reply: unknown): Res;
}

/**
 * Where shared limiter state lives. The contract a store must keep:
 *
 * - `run` executes the operation atomically: no other operation on the same key interleaves.
 * - Time comes from the store (`now` passed to `apply` is the store's clock), so all instances
 *   agree on it whatever their own clocks say.
 * - Every key the store writes expires once its state is equivalent to an absent key
 *   (`Transition.ttlMs`); nothing is kept forever.
 * - A failed or timed-out `run` rejects with a `TokenleaseError`; it is never retried blindly,
 *   because the operation may have been applied. A call that certainly did not run (never sent, or
 *   refused by the store before it changed anything) rejects with `StoreUnavailableError`.
 * - `run` settles within the store's timeout (or the call's `timeoutMs`) from the moment it is
 *   called, time spent waiting in a batch or for the connection included.
 *
 * The limiter calls `run` only on a lease miss, a lease return or a refill-ahead, never per request
 * (except in exact mode and for the always-exact algorithms); after `close()` it calls `run` only
 * to free concurrency slots whose holders release them late (a failure there is ignored: the
 * slots then expire).
 */
/** How the limiter marks a store call. */
export interface RunOptions {
  /**
   * Nobody waits for the answer (a refill ahead, a hand-back, a usage report): a store that batches
   * may hold it a little longer for company, and never sends it ahead of a call somebody waits for.
   * @default false
   */
  readonly background?: boolean;
  /**
   * Longest wait for this call's answer in ms, in place of the store's own timeout: a limiter
   * that is closing hands its leases back within its `closeTimeoutMs` rather than giving up on a
   * stalled store after one call timeout.
   * @default the store's timeout
   */
  readonly timeoutMs?: number;
}

export interface Store {
  /**
   * A store may coalesce the calls made at about the same moment into one round trip (RedisStore
   * does); each call stays atomic on its own and settles on its own.
   */
  run<S, Req, Res>(op: Operation<S, Req, Res>, key: string, req: Req, options?: RunOptions): Promise<Res>;
  /**
   * Which keys fail together, e.g. the Redis Cluster node serving the key. The limiter suspends
   * calls per shard after failures, so one failed node does not suspend the keys of the others.
   * Without it, the whole store is one shard. Must be cheap and must not fail.
   */
  shardOf?(key: string): string;
  /** Releases connections the store owns. Idempotent. */
  close(): Promise<void>;
}
