/**
 * Token bucket with leases: the shared allocator both stores run (the Lua in
 * `lua/token_bucket_acquire.lua` and `lua/token_bucket_release.lua` is a line-by-line port).
 *
 * Over the limit: a request for `min` tokens is refused (nothing is debited) unless
 * `level + ahead >= min`. `ahead` lets a lease reach into the future: the level may go negative
 * down to `-ahead`, and the granted tokens only become usable as the refill covers them
 * (see `src/lease.ts`). With `ahead = 0` and `want = min = cost` this is the exact bucket.
 *
 * Arithmetic is kept in the same order as the Lua so both produce bit-identical doubles.
 */

/** Stored state of one bucket. An absent bucket is full. */
export interface TokenBucketState {
  /** Tokens in the bucket at `ts`; negative when leases reach into the future. */
  readonly level: number;
  /** Store time in ms of the last write. */
  readonly ts: number;
}

export interface TokenBucketShape {
  /** Tokens added per `periodMs`. */
  readonly rate: number;
  readonly periodMs: number;
  /** Capacity. */
  readonly burst: number;
}

export interface AcquireRequest extends TokenBucketShape {
  /** Tokens wanted for the lease. */
  readonly want: number;
  /** Fewest tokens worth granting (the cost that is waiting); below it nothing is granted. */
  readonly min: number;
  /** How far below zero the level may go: tokens that may be leased before they exist. */
  readonly ahead: number;
}

export interface AcquireResult {
  readonly granted: number;
  /** Level after refill and before the debit: where this lease's tokens start in the queue. */
  readonly levelBefore: number;
  /** The store's clock when it decided. */
  readonly now: number;
}

export interface ReleaseRequest extends TokenBucketShape {
  readonly tokens: number;
}

/** The result of an operation: the next state (undefined = delete) and its time to live. */
export interface Transition<S, R> {
  readonly state: S | undefined;
  readonly ttlMs: number;
  readonly result: R;
}

export function refill(state: TokenBucketState | undefined, now: number, shape: TokenBucketShape): number {
  if (state === undefined) return shape.burst;
  // A clock that went backwards refills nothing rather than blocking until it catches up.
  const elapsed = Math.max(0, now - state.ts);
  return Math.min(shape.burst, state.level + (elapsed * shape.rate) / shape.periodMs);
}

/**
 * Milliseconds until a bucket at `level` is full again: after that its key carries no information.
 * The extra millisecond absorbs rounding, so an expired bucket is always really full.
 */
export function msUntilFull(level: number, shape: TokenBucketShape): number {
  return Math.ceil(((shape.burst - level) * shape.periodMs) / shape.rate) + 1;
}

export function acquire(
  state: TokenBucketState | undefined,
  now: number,
  req: AcquireRequest,
): Transition<TokenBucketState, AcquireResult> {
  const level = refill(state, now, req);
  const room = level + req.ahead;
  let granted = 0;
  if (room >= req.want) granted = req.want;
  else if (room >= req.min) granted = room;
  // A refusal writes nothing: the state (same reference) and its expiry stay as they were.
  if (granted === 0) return { state, ttlMs: 0, result: { granted, levelBefore: level, now } };
  const next = level - granted;
  return {
    state: { level: next, ts: now },
    ttlMs: msUntilFull(next, req),
    result: { granted, levelBefore: level, now },
  };
}

/** Hands unused leased tokens back; the bucket never rises above its capacity. */
export function release(
  state: TokenBucketState | undefined,
  now: number,
  req: ReleaseRequest,
): Transition<TokenBucketState, null> {
  if (state === undefined) return { state: undefined, ttlMs: 0, result: null };
  const next = Math.min(req.burst, refill(state, now, req) + req.tokens);
  return { state: { level: next, ts: now }, ttlMs: msUntilFull(next, req), result: null };
}

/** Milliseconds until `min` tokens fit in the window of a bucket at `level`. */
export function msUntilRoom(
  level: number,
  req: Pick<AcquireRequest, 'min' | 'ahead'> & TokenBucketShape,
): number {
  const missing = req.min - (level + req.ahead);
  if (missing <= 0) return 0;
  return (missing * req.periodMs) / req.rate;
}
