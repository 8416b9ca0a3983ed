/**
 * Concurrency engine: `acquire` holds slots until the handle's `release()`. Leased mode keeps a
 * block of free slots locally (slow start from 1, at most `maxFraction` of the slots free across
 * the cluster, so it shrinks to nothing near the limit): an acquire takes a local free slot when
 * there is one, a release puts the slot back in the local pool — or straight back to the store
 * when the pool is already as large as the cluster's free count allows. Free slots unused for a
 * lease time go back to the store. `lease: 'exact'` makes every acquire and release a store call.
 *
 * Every slot this instance holds (in use or free) is renewed on the sweep before half its
 * `slotTtl` has passed; slots of an instance that died simply expire.
 */

import { slotId } from '../algorithms/concurrency.js';
import { type Decision, decisionWith, type SlotHandle } from '../decision.js';
import { leaseSize } from '../demand.js';
import type { ReturnReason } from '../observe/events.js';
import type { ConcurrencyRule } from '../policy.js';
import { concurrencyAcquire, concurrencyRelease, concurrencyRenew } from '../stores/concurrencyOps.js';
import {
  BACKGROUND,
  type Engine,
  type EngineContext,
  handBack,
  type KeyState,
  leaseGranted,
  MAX_ATTEMPTS,
  retryAfter,
  seconds,
  storeCall,
} from './engine.js';

interface Grant {
  readonly granted: number;
  readonly retryMs: number;
  readonly sentAt: number;
}

class ConcurrencyKey implements KeyState {
  /** Leased slots not in use. */
  #free: string[] = [];
  readonly #inUse = new Set<string>();
  /** Local time by which held slots must be renewed. */
  #renewAt = Number.POSITIVE_INFINITY;
  /** Local time the free pool was last drawn from or added to. */
  #freeSince = 0;
  #lastGrant = 0;
  /** Slots free across the cluster after the last store reply. */
  #knownFree: number;
  #inflight: Promise<Grant> | undefined;
  #renewing = false;

  constructor(
    private readonly ctx: EngineContext,
    readonly rule: ConcurrencyRule,
    readonly key: string,
    readonly storageKey: string,
  ) {
    this.#knownFree = rule.limit;
  }

  async acquire(cost: number): Promise<SlotHandle> {
    const { ctx, rule } = this;
    if (cost > rule.limit) return this.#refused(0, cost, Number.POSITIVE_INFINITY);
    for (let attempt = 0; ; attempt++) {
      if (this.#free.length >= cost) return this.#hold(attempt, cost, this.#free.splice(0, cost));
      if (attempt === MAX_ATTEMPTS) return this.#refused(attempt, cost, 1);
      const grant = await this.#acquire(cost - this.#free.length);
      if (grant.granted === 0 && this.#free.length < cost) {
        return this.#refused(attempt + 1, cost, grant.sentAt + grant.retryMs - ctx.now());
      }
    }
  }

  /** Single-flight: concurrent misses share one store call. */
  #acquire(min: number): Promise<Grant> {
    if (this.#inflight) return this.#inflight;
    const { ctx, rule } = this;
    const want = rule.exact ? min : Math.max(min, leaseSize(this.#lastGrant, this.#cap()));
    const owner = ctx.nextId();
    const request = { limit: rule.limit, want, min, ttlMs: rule.slotTtlMs, owner, first: 0 };
    const sentAt = ctx.now();
    const call = storeCall(ctx, concurrencyAcquire, this.storageKey, request)
      .then((result) => {
        this.#knownFree = rule.limit - result.held;
        if (result.granted > 0) {
          leaseGranted(ctx, rule.name, this.key, result.granted);
          this.#lastGrant = result.granted;
          for (let i = 0; i < result.granted; i++) this.#free.push(slotId(owner, i));
          this.#freeSince = ctx.now();
          this.#renewAt = Math.min(this.#renewAt, sentAt + rule.slotTtlMs / 2);
          this.ctx.pin(this);
        }
        return { granted: result.granted, retryMs: result.retryMs, sentAt };
      })
      .finally(() => {
        this.#inflight = undefined;
      });
    this.#inflight = call;
    ctx.track(call);
    return call;
  }

  /** Largest local pool: a fraction of the slots free across the cluster. */
  #cap(): number {
    return Math.max(1, Math.floor(this.#knownFree * this.rule.maxFraction));
  }

  #hold(storeWaits: number, cost: number, ids: string[]): SlotHandle {
    for (const id of ids) this.#inUse.add(id);
    this.#freeSince = this.ctx.now();
    let released = false;
    const release = async () => {
      if (released) return;
      released = true;
      await this.#release(ids);
    };
    return decisionWith(this.ctx.answer(storeWaits, cost, undefined, this.#decision(true, 0)), { release });
  }

  #release(ids: readonly string[]): Promise<void> {
    const { ctx, rule } = this;
    const mine = ids.filter((id) => this.#inUse.delete(id));
    if (mine.length === 0) return Promise.resolve();
    const pooled = !rule.exact && !ctx.closed && ctx.peek(this.storageKey) === this;
    const keep = pooled ? Math.max(0, Math.floor(this.#knownFree * rule.maxFraction) - this.#free.length) : 0;
    this.#free.push(...mine.slice(0, keep));
    this.#freeSince = ctx.now();
    const back = mine.slice(keep);
    this.#settle();
    if (back.length === 0) return Promise.resolve();
    const call = storeCall(ctx, concurrencyRelease, this.storageKey, { ids: back })
      .then((held) => {
        this.#knownFree = rule.limit - held;
      })
      .catch(() => {});
    ctx.track(call);
    return call;
  }

  /** Unpins once nothing is held. */
  #settle(): void {
    if (this.#free.length === 0 && this.#inUse.size === 0) {
      this.#renewAt = Number.POSITIVE_INFINITY;
      this.ctx.unpin(this);
    }
  }

  returnUnused(reason: ReturnReason): void {
    const ids = this.#free;
    this.#free = [];
    this.#settle();
    if (ids.length === 0) return;
    const returned = { policy: this.rule.name, key: this.key, tokens: ids.length, reason };
    handBack(this.ctx, concurrencyRelease, this.storageKey, { ids }, returned);
  }

  sweep(now: number): boolean {
    // An evicted state only finishes what is in use: nobody will draw on its free slots.
    if (this.#free.length > 0 && !this.#inflight && this.ctx.peek(this.storageKey) !== this) {
      this.returnUnused('orphaned');
    }
    if (this.#free.length > 0 && now >= this.#freeSince + this.rule.leaseTtlMs && !this.#inflight) {
      this.returnUnused('expired');
    }
    if (now >= this.#renewAt) this.#renew(now);
    return this.#free.length === 0 && this.#inUse.size === 0 && !this.#inflight;
  }

  #renew(now: number): void {
    if (this.#renewing) return;
    const ids = [...this.#inUse, ...this.#free];
    if (ids.length === 0) return;
    const { ctx, rule } = this;
    this.#renewing = true;
    this.#renewAt = now + rule.slotTtlMs / 2;
    const call = storeCall(ctx, concurrencyRenew, this.storageKey, { ids, ttlMs: rule.slotTtlMs }, BACKGROUND)
      .then((lost) => {
        // Expired while held (this process stalled longer than slotTtl): someone may have them now.
        const gone = new Set(lost);
        this.#free = this.#free.filter((id) => !gone.has(id));
        for (const id of gone) this.#inUse.delete(id);
        this.#settle();
      })
      .catch(() => {
        // Try again on the next sweep; the slots live until their expiry regardless.
        this.#renewAt = now;
      })
      .finally(() => {
        this.#renewing = false;
      });
    ctx.track(call);
  }

  #refused(storeWaits: number, cost: number, retryAfterMs: number): SlotHandle {
    const decision = this.ctx.answer(storeWaits, cost, undefined, this.#decision(false, retryAfterMs));
    return decisionWith(decision, { release: async () => {} });
  }

  #decision(allowed: boolean, retryAfterMs: number): Decision {
    const { rule } = this;
    return {
      allowed,
      policy: rule.name,
      key: this.key,
      limit: rule.limit,
      remaining: Math.max(0, Math.min(rule.limit, this.#knownFree + this.#free.length)),
      // Slots free up when their holders release them: there is no schedule to report.
      resetMs: 0,
      retryAfterMs: allowed ? 0 : retryAfter(retryAfterMs),
    };
  }
}

export const concurrencyEngine: Engine<ConcurrencyRule> = {
  open: (ctx, rule, key, storageKey) => new ConcurrencyKey(ctx, rule, key, storageKey),
  methods: ['acquire'],
  // No window: slots free when released, a dead holder's within one slot TTL.
  describe: (rule) => ({ limit: rule.limit, windowSeconds: seconds(rule.slotTtlMs) }),
};
