/**
 * Quantised sliding log: the log of `slidingLog.ts` with its entries rounded to `quantum` ms buckets
 * (per-second buckets with `quantum: '1s'`). Memory is one counter per bucket — at most
 * `window / quantum + 1` of them — instead of one entry per admitted unit.
 *
 * Over the limit: refused and not recorded, as in the exact log. A bucket is counted for as long
 * as ANY part of it is inside the window, so the guarantee of the exact log still holds (no
 * interval `(t - window, t]` holds more than `limit`); what is given up is up to one `quantum`:
 * an admitted unit is forgotten up to `quantum` ms later than the exact log would forget it, so a
 * request can be refused that the exact log would admit, never the other way round.
 *
 * The Lua in `lua/sliding_log_quantised_acquire.lua` and `..._release.lua` is a line-by-line port.
 */
import { type Estimate, unchanged } from './estimate.js';
import type { Transition } from './transition.js';

/** Stored state: units admitted per bucket (bucket i covers `[i * quantum, (i + 1) * quantum)`). */
export interface QuantisedLogState {
  /** Lowest bucket index that may still hold units. */
  readonly oldest: number;
  /** Highest bucket index written: the log is empty once it has left the window. */
  readonly newest: number;
  readonly total: number;
  readonly buckets: ReadonlyMap<number, number>;
}

export interface QuantisedAcquireRequest {
  readonly limit: number;
  readonly windowMs: number;
  readonly quantumMs: number;
  /** Whole units. */
  readonly cost: number;
}

export interface QuantisedAcquireResult {
  readonly allowed: boolean;
  readonly count: number;
  /** The bucket the units went into (a refund names it); -1 when refused. */
  readonly bucket: number;
  readonly retryMs: number;
  readonly resetMs: number;
}

export interface QuantisedReleaseRequest {
  readonly windowMs: number;
  readonly quantumMs: number;
  readonly bucket: number;
  readonly cost: number;
}

/** Ms from `now` until bucket `b` has wholly left the window. */
function leavesIn(b: number, now: number, req: { windowMs: number; quantumMs: number }): number {
  return (b + 1) * req.quantumMs + req.windowMs - now;
}

/** Drops the buckets that have wholly left the window ending at `now`. */
function trim(
  state: QuantisedLogState | undefined,
  now: number,
  req: QuantisedPeekRequest,
): QuantisedLogState | undefined {
  if (state === undefined) return undefined;
  // Buckets more than a window ahead were filed at a finer quantum (the policy's `quantum` grew, or
  // two limiters give one policy name different quanta): read at this one they would leave the
  // window ages from now. They cannot be re-read, so the log starts afresh, as a coarser quantum's
  // buckets read at a finer one have left the window (below).
  if (state.newest * req.quantumMs > now + req.windowMs) return undefined;
  const first = Math.floor((now - req.windowMs) / req.quantumMs);
  if (first <= state.oldest) return state;
  // Stored buckets never reach more than `span` past `oldest`, so past that everything is gone
  // (and a long idle gap costs no loop).
  const span = Math.ceil(req.windowMs / req.quantumMs) + 1;
  if (first >= state.oldest + span) return undefined;
  const buckets = new Map(state.buckets);
  let total = state.total;
  for (let b = state.oldest; b < first; b++) {
    total -= buckets.get(b) ?? 0;
    buckets.delete(b);
  }
  return { oldest: first, newest: state.newest, total, buckets };
}

/** A read of a quantised log (`Limiter.peek`). */
export type QuantisedPeekRequest = Pick<QuantisedAcquireRequest, 'limit' | 'windowMs' | 'quantumMs'>;

/**
 * What a request of cost 1 would see now, changing nothing: buckets that left the window are
 * skipped, not dropped (port: `lua/sliding_log_quantised_peek.lua`).
 */
export function peek(
  state: QuantisedLogState | undefined,
  now: number,
  req: QuantisedPeekRequest,
): Transition<QuantisedLogState, Estimate> {
  const s = trim(state, now, req);
  const count = s?.total ?? 0;
  let retryMs = 0;
  if (s !== undefined && count + 1 > req.limit) {
    let need = count + 1 - req.limit;
    let b = s.oldest;
    for (; need > 0; b++) need -= s.buckets.get(b) ?? 0;
    retryMs = leavesIn(b - 1, now, req);
  }
  const resetMs = s !== undefined && count > 0 ? leavesIn(s.newest, now, req) : 0;
  return unchanged(state, { remaining: req.limit - count, resetMs, retryMs });
}

export function acquire(
  state: QuantisedLogState | undefined,
  now: number,
  req: QuantisedAcquireRequest,
): Transition<QuantisedLogState, QuantisedAcquireResult> {
  if (req.cost > req.limit) {
    // Never fits; the limiter refuses such a cost before asking.
    return { state, ttlMs: 0, result: { allowed: false, count: 0, bucket: -1, retryMs: 0, resetMs: 0 } };
  }
  const s = trim(state, now, req);
  const count = s?.total ?? 0;
  if (count + req.cost > req.limit) {
    // Defined: an empty log has room for any cost <= limit.
    const kept = s!;
    let need = count + req.cost - req.limit;
    let b = kept.oldest;
    for (; need > 0; b++) need -= kept.buckets.get(b) ?? 0;
    const result = {
      allowed: false,
      count,
      bucket: -1,
      retryMs: leavesIn(b - 1, now, req),
      resetMs: leavesIn(kept.newest, now, req),
    };
    if (kept === state) return { state, ttlMs: 0, result };
    return { state: kept, ttlMs: Math.ceil(result.resetMs), result };
  }
  // A clock that went backwards files the units in the oldest live bucket: they are kept longer.
  const bucket = Math.max(Math.floor(now / req.quantumMs), s?.oldest ?? Number.NEGATIVE_INFINITY);
  const buckets = new Map(s?.buckets ?? []);
  buckets.set(bucket, (buckets.get(bucket) ?? 0) + req.cost);
  const next = {
    oldest: s?.oldest ?? bucket,
    newest: Math.max(bucket, s?.newest ?? bucket),
    total: count + req.cost,
    buckets,
  };
  const resetMs = leavesIn(next.newest, now, req);
  return {
    state: next,
    ttlMs: Math.ceil(resetMs),
    result: { allowed: true, count: next.total, bucket, retryMs: 0, resetMs },
  };
}

/** Takes a refunded request's units out of its bucket, if that bucket is still kept. */
export function release(
  state: QuantisedLogState | undefined,
  now: number,
  req: QuantisedReleaseRequest,
): Transition<QuantisedLogState, null> {
  const held = state?.buckets.get(req.bucket);
  if (state === undefined || held === undefined) return { state, ttlMs: 0, result: null };
  const taken = Math.min(held, req.cost);
  const buckets = new Map(state.buckets);
  if (held > taken) buckets.set(req.bucket, held - taken);
  else buckets.delete(req.bucket);
  const next = { ...state, total: state.total - taken, buckets };
  return { state: next, ttlMs: Math.ceil(leavesIn(next.newest, now, req)), result: null };
}
