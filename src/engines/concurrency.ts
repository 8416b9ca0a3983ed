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
 *
 * Shared with the lease core (`LeaseHolder`): single-flight acquisition, slow start, grants counted
 * (and handed back when they land on an evicted state) and the decisions' shape. Its own: slots
 * carry ids and are renewed while held, and a released slot goes back to the local pool (up to a
 * share of what is free across the cluster), since slots are held and given back, not spent. So a
 * pool expires a lease time after it was last used, not after it was granted, and there is no
 * demand estimate (a slot is held for as long as its holder needs it) and no refill ahead.
 * Nor is a refusal remembered, as the lease core remembers one: a slot frees whenever a holder
 * anywhere releases it, so a refusal tells no time before which the next acquire must fail.
 */

import { slotId } from '../algorithms/concurrency.js';
import { decisionWith, type SlotHandle } from '../decision.js';
import type { ReturnReason } from '../observe/events.js';
import type { ConcurrencyRule } from '../policy.js';
import { concurrencyAcquire, concurrencyRelease, concurrencyRenew } from '../stores/concurrencyOps.js';
import {
  BACKGROUND,
  type Engine,
  type EngineContext,
  handBack,
  MAX_ATTEMPTS,
  seconds,
  storeCall,
} from './engine.js';
import { LeaseHolder } from './leaseHolder.js';

interface Grant {
  readonly granted: number;
  readonly retryMs: number;
  readonly sentAt: number;
}

class ConcurrencyKey extends LeaseHolder<ConcurrencyRule, Grant> {
  /** Leased slots not in use. */
  #free: string[] = [];
  readonly #inUse = new Set<string>();
  /** Local time by which held slots must be renewed. */
  #renewAt = Number.POSITIVE_INFINITY;
  /** Local time the free pool was last drawn from or added to. */
  #freeSince = 0;
  /** Slots free across the cluster after the last store reply. */
  #knownFree: number;
  #renewing = false;

  constructor(ctx: EngineContext, rule: ConcurrencyRule, key: string, storageKey: string) {
    super(ctx, rule, key, storageKey);
    this.#knownFree = rule.limit;
  }

  async acquire(cost: number): Promise<SlotHandle> {
    const { ctx, rule } = this;
    if (cost > rule.limit) return this.#refused(0, cost, Number.POSITIVE_INFINITY);
    for (let attempt = 0; ; attempt++) {
      if (this.#free.length >= cost) return this.#hold(attempt, cost, this.#free.splice(0, cost));
      if (attempt === MAX_ATTEMPTS) return this.#refused(attempt, cost, 1);
      const acquired = this.#acquire(cost - this.#free.length);
      this.waiting += cost;
      let grant: Grant;
      try {
        grant = await acquired;
      } finally {
        this.waiting -= cost;
      }
      if (grant.granted === 0 && this.#free.length < cost) {
        return this.#refused(attempt + 1, cost, grant.sentAt + grant.retryMs - ctx.now());
      }
    }
  }

  /** A block of at least `min` free slots, single-flight (`LeaseHolder.acquireOnce`). */
  #acquire(min: number): Promise<Grant> {
    return this.acquireOnce(() => this.#ask(min));
  }

  #ask(min: number): Promise<Grant> {
    const { ctx, rule } = this;
    const want = rule.exact ? min : Math.max(min + this.waiting, this.nextLease(this.#cap()));
    const owner = ctx.nextId();
    const request = { limit: rule.limit, want, min, ttlMs: rule.slotTtlMs, owner, first: 0 };
    const sentAt = ctx.now();
    return storeCall(ctx, concurrencyAcquire, this.storageKey, request).then((result) => {
      this.#knownFree = rule.limit - result.held;
      if (result.granted > 0) {
        this.granted(result.granted);
        for (let i = 0; i < result.granted; i++) this.#free.push(slotId(owner, i));
        this.#freeSince = ctx.now();
        this.#renewAt = Math.min(this.#renewAt, sentAt + rule.slotTtlMs / 2);
        ctx.pin(this);
      }
      return { granted: result.granted, retryMs: result.retryMs, sentAt };
    });
  }

  /** Largest local pool: a fraction of the slots free across the cluster. */
  #cap(): number {
    return Math.max(1, Math.floor(this.#knownFree * this.rule.maxFraction));
  }

  #hold(storeWaits: number, cost: number, ids: string[]): SlotHandle {
    const { ctx } = this;
    for (const id of ids) this.#inUse.add(id);
    const now = ctx.now();
    this.#freeSince = now;
    let released = false;
    const release = async () => {
      if (released) return;
      released = true;
      await this.#release(ids);
    };
    return decisionWith(ctx.answer(storeWaits, cost, undefined, this.decision(now, true, 0)), { release });
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

  override returnUnused(reason: ReturnReason): void {
    const ids = this.#free;
    this.#free = [];
    this.#settle();
    if (ids.length === 0) return;
    const returned = { policy: this.rule.name, key: this.key, tokens: ids.length, reason };
    handBack(this.ctx, concurrencyRelease, this.storageKey, { ids }, returned);
  }

  override sweep(now: number): boolean {
    if (this.#free.length > 0 && now >= this.#freeSince + this.rule.leaseTtlMs && !this.inflight) {
      this.returnUnused('expired');
    }
    if (now >= this.#renewAt) this.#renew(now);
    return this.#free.length === 0 && this.#inUse.size === 0 && !this.inflight;
  }

  #renew(now: number): void {
    if (this.#renewing) return;
    const ids = [...this.#inUse, ...this.#free];
    if (ids.length === 0) return;
    const { ctx, rule } = this;
    this.#renewing = true;
    this.#renewAt = now + rule.slotTtlMs / 2;
    const call = storeCall(
      ctx,
      concurrencyRenew,
      this.storageKey,
      { ids, ttlMs: rule.slotTtlMs, limit: rule.limit },
      BACKGROUND,
    )
      .then((lost) => {
        // Gone from the store and no room to put them back: someone else has their places.
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
    const { ctx } = this;
    const decision = ctx.answer(storeWaits, cost, undefined, this.decision(ctx.now(), false, retryAfterMs));
    return decisionWith(decision, { release: async () => {} });
  }

  protected override get limit(): number {
    return this.rule.limit;
  }

  protected override remainingAt(): number {
    return this.#knownFree + this.#free.length;
  }

  /** Slots free up when their holders release them: there is no schedule to report. */
  protected override resetMs(): number {
    return 0;
  }
}

export const concurrencyEngine: Engine<ConcurrencyRule> = {
  open: (ctx, rule, key, storageKey) => new ConcurrencyKey(ctx, rule, key, storageKey),
  methods: ['acquire'],
  // No window: slots free when released, a dead holder's within one slot TTL.
  describe: (rule) => ({ limit: rule.limit, windowSeconds: seconds(rule.slotTtlMs) }),
};
