/**
 * Concurrency limit: at most `limit` slots held at once per key. Each slot is an id with an expiry
 * (a ZSET member scored by its expiry time in Redis). A holder renews its slots while it uses them;
 * slots of a holder that died are trimmed once their expiry passes, so a crash costs capacity only
 * for one `ttlMs`. A renewal puts back slots the store no longer has (it lost its data, or the
 * holder stalled past their expiry) while they fit under the limit.
 *
 * Over the limit: refused, nothing recorded; the caller learns when the earliest held slot expires
 * if nobody releases it (an upper bound on the wait: a release frees a slot sooner).
 *
 * The Lua in `lua/concurrency_acquire.lua`, `lua/concurrency_release.lua` and
 * `lua/concurrency_renew.lua` is a line-by-line port.
 */
import type { Transition } from './transition.js';

/** Stored state: slot id -> expiry time in ms. */
export interface ConcurrencyState {
  readonly slots: ReadonlyMap<string, number>;
}

export interface SlotAcquireRequest {
  readonly limit: number;
  /** Slots wanted (a block an instance hands out locally). */
  readonly want: number;
  /** Fewest slots worth granting; below it nothing is granted. */
  readonly min: number;
  /** Ms a slot lives without renewal. */
  readonly ttlMs: number;
  /** Granted slots are `${owner}:${first}`, `${owner}:${first + 1}`, ... (the caller keeps ids unique). */
  readonly owner: string;
  readonly first: number;
}

export interface SlotAcquireResult {
  readonly granted: number;
  /** Slots held after this call. */
  readonly held: number;
  /** 0 when granted; otherwise ms until the earliest held slot expires. */
  readonly retryMs: number;
}

export interface ReleaseRequest {
  readonly ids: readonly string[];
}

export interface RenewRequest extends ReleaseRequest {
  /** Ms a renewed slot lives. */
  readonly ttlMs: number;
  /** Most slots held at once: a slot the store no longer has is put back only below it. */
  readonly limit: number;
}

export function slotId(owner: string, n: number): string {
  return `${owner}:${n}`;
}

function live(state: ConcurrencyState | undefined, now: number): Map<string, number> {
  const slots = new Map<string, number>();
  if (state) for (const [id, expiry] of state.slots) if (expiry > now) slots.set(id, expiry);
  return slots;
}

/** A key lives until its last slot expires; an empty set is an absent key. */
function settle<R>(slots: Map<string, number>, now: number, result: R): Transition<ConcurrencyState, R> {
  if (slots.size === 0) return { state: undefined, ttlMs: 0, result };
  let last = 0;
  for (const expiry of slots.values()) if (expiry > last) last = expiry;
  return { state: { slots }, ttlMs: Math.ceil(last - now), result };
}

export function acquire(
  state: ConcurrencyState | undefined,
  now: number,
  req: SlotAcquireRequest,
): Transition<ConcurrencyState, SlotAcquireResult> {
  const slots = live(state, now);
  const free = req.limit - slots.size;
  const granted = free >= req.want ? req.want : free >= req.min ? free : 0;
  if (granted === 0) {
    let earliest = Number.POSITIVE_INFINITY;
    for (const expiry of slots.values()) if (expiry < earliest) earliest = expiry;
    const retryMs = slots.size === 0 ? 0 : earliest - now;
    return settle(slots, now, { granted, held: slots.size, retryMs });
  }
  for (let i = 0; i < granted; i++) slots.set(slotId(req.owner, req.first + i), now + req.ttlMs);
  return settle(slots, now, { granted, held: slots.size, retryMs: 0 });
}

/** Frees slots; ids that expired already are ignored. Returns the slots still held. */
export function release(
  state: ConcurrencyState | undefined,
  now: number,
  req: ReleaseRequest,
): Transition<ConcurrencyState, number> {
  const slots = live(state, now);
  for (const id of req.ids) slots.delete(id);
  return settle(slots, now, slots.size);
}

/**
 * Extends the holder's slots by `ttlMs`. A slot the store no longer has (it lost its data, or the
 * slot expired while its holder stalled) is put back while fewer than `limit` are held: the
 * request holding it is still running, so leaving it out would admit one more than the limit.
 * Returns the ids that did not fit (the holder lost them: someone else has their place).
 */
export function renew(
  state: ConcurrencyState | undefined,
  now: number,
  req: RenewRequest,
): Transition<ConcurrencyState, string[]> {
  const slots = live(state, now);
  const lost: string[] = [];
  for (const id of req.ids) {
    if (slots.has(id) || slots.size < req.limit) slots.set(id, now + req.ttlMs);
    else lost.push(id);
  }
  return settle(slots, now, lost);
}
