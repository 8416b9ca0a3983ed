/**
 * Sliding log: the exact count over the last `window` ms. Every admitted unit of cost is one entry
 * (a ZSET member in Redis, scored by its time); entries older than the window are trimmed, the rest
 * counted, and the request appended only if it fits — trim, count and append in ONE atomic step.
 * (The common recipe pipelines ZCARD and sends ZADD in a second round trip: concurrent callers all see the
 * same count and all append, over-admitting.)
 *
 * Over the limit: the request is refused and NOT recorded, so a client hammering a full log does
 * not push its own reset further away. Guarantee: no half-open interval `(t - window, t]` ever
 * holds more than `limit` admitted units. Memory grows with `limit` (one entry per admitted unit).
 *
 * Quantised mode (`quantum`, see `slidingLogQuantised.ts`) trades exactness for memory.
 *
 * The Lua in `lua/sliding_log_acquire.lua` and `lua/sliding_log_release.lua` is a line-by-line port.
 */
import { type Estimate, unchanged } from './estimate.js';
import type { Transition } from './transition.js';

export interface LogEntry {
  readonly member: string;
  /** Time in ms the unit was admitted. */
  readonly score: number;
}

/** Stored state: entries in time order (the order of equal times never changes an answer). */
export interface SlidingLogState {
  readonly entries: readonly LogEntry[];
}

export interface LogAcquireRequest {
  readonly limit: number;
  readonly windowMs: number;
  /** Whole units; each becomes one entry. */
  readonly cost: number;
  /** Unique per request (instance id + counter): entries are `${id}:${i}`, unique even within 1 ms. */
  readonly id: string;
}

export interface LogAcquireResult {
  readonly allowed: boolean;
  /** Units counted in the window after this call. */
  readonly count: number;
  /** 0 when allowed; otherwise ms until enough old entries leave the window for `cost` to fit. */
  readonly retryMs: number;
  /** Ms until every entry has left the window. */
  readonly resetMs: number;
}

export interface LogReleaseRequest {
  /** Needed for the key's expiry only. */
  readonly windowMs: number;
  readonly cost: number;
  /** The id of the admitted request whose entries are removed (a refund). */
  readonly id: string;
}

export function member(id: string, i: number): string {
  return `${id}:${i}`;
}

/** Entries still inside the window ending at `now`: those with `score > now - windowMs`. */
function trim(entries: readonly LogEntry[], now: number, windowMs: number): readonly LogEntry[] {
  const cutoff = now - windowMs;
  let first = 0;
  while (first < entries.length && entries[first]!.score <= cutoff) first++;
  return first === 0 ? entries : entries.slice(first);
}

export function acquire(
  state: SlidingLogState | undefined,
  now: number,
  req: LogAcquireRequest,
): Transition<SlidingLogState, LogAcquireResult> {
  if (req.cost > req.limit) {
    // Never fits; the limiter refuses such a cost before asking.
    return { state, ttlMs: 0, result: { allowed: false, count: 0, retryMs: 0, resetMs: 0 } };
  }
  const entries = trim(state?.entries ?? [], now, req.windowMs);
  const count = entries.length;
  const newest = entries[count - 1];
  if (count + req.cost > req.limit) {
    // The oldest `count + cost - limit` entries must leave before `cost` more fit (count > 0 here).
    const blocking = entries[count + req.cost - req.limit - 1]!;
    const result = {
      allowed: false,
      count,
      retryMs: blocking.score + req.windowMs - now,
      resetMs: newest!.score + req.windowMs - now,
    };
    // Trimming is not a change of meaning: expired entries count for nothing either way.
    return { state: { entries }, ttlMs: Math.ceil(newest!.score + req.windowMs - now), result };
  }
  const next = entries.slice();
  // Entries after `now` exist only if an explicit clock went backwards.
  let at = next.length;
  while (at > 0 && next[at - 1]!.score > now) at--;
  const added: LogEntry[] = [];
  for (let i = 1; i <= req.cost; i++) added.push({ member: member(req.id, i), score: now });
  next.splice(at, 0, ...added);
  const last = next[next.length - 1]!;
  return {
    state: { entries: next },
    ttlMs: Math.ceil(last.score + req.windowMs - now),
    result: { allowed: true, count: count + req.cost, retryMs: 0, resetMs: last.score + req.windowMs - now },
  };
}

/** A read of a log (`Limiter.peek`). */
export type LogPeekRequest = Pick<LogAcquireRequest, 'limit' | 'windowMs'>;

/**
 * What a request of cost 1 would see now, changing nothing: expired entries are skipped, not
 * trimmed (port: `lua/sliding_log_peek.lua`).
 */
export function peek(
  state: SlidingLogState | undefined,
  now: number,
  req: LogPeekRequest,
): Transition<SlidingLogState, Estimate> {
  const entries = trim(state?.entries ?? [], now, req.windowMs);
  const count = entries.length;
  const newest = entries[count - 1];
  // The oldest `count + 1 - limit` entries must leave before one more fits.
  const blocking = count + 1 > req.limit ? entries[count - req.limit] : undefined;
  return unchanged(state, {
    remaining: req.limit - count,
    resetMs: newest === undefined ? 0 : newest.score + req.windowMs - now,
    retryMs: blocking === undefined ? 0 : blocking.score + req.windowMs - now,
  });
}

/** Removes the entries of an admitted request (a refund of a multi-rule check refused elsewhere). */
export function release(
  state: SlidingLogState | undefined,
  now: number,
  req: LogReleaseRequest,
): Transition<SlidingLogState, null> {
  if (state === undefined) return { state, ttlMs: 0, result: null };
  const gone = new Set<string>();
  for (let i = 1; i <= req.cost; i++) gone.add(member(req.id, i));
  const entries = state.entries.filter((e) => !gone.has(e.member));
  if (entries.length === 0) return { state: undefined, ttlMs: 0, result: null };
  const last = entries[entries.length - 1]!;
  return { state: { entries }, ttlMs: Math.ceil(last.score + req.windowMs - now), result: null };
}
