/**
 * Leaky bucket engine: every decision reserves a turn in the shared drain (one store call; a
 * lease would break the steady spacing across instances). `consume` admits only what can go now;
 * `reserve` / `Limiter.wait` accept a turn up to `maxWaitMs` ahead. The deny cache stays local: a
 * refusal says when the drain will have room, and until then a request that would wait longer
 * than its bound is refused from memory.
 */
import { drainMs } from '../algorithms/leakyBucket.js';
import { type Check, type Decision, decisionWith, type Reservation } from '../decision.js';
import type { LeakyBucketRule } from '../policy.js';
import { leakyBucketCancel, leakyBucketReserve } from '../stores/leakyBucketOps.js';
import {
  type Consumed,
  type Engine,
  type EngineContext,
  type KeyState,
  refunded,
  retryAfter,
  seconds,
  storeCall,
} from './engine.js';

class LeakyBucketKey implements KeyState {
  /** A request of `#deniedCost` units could go without waiting from this local time on. */
  #deniedUntil = 0;
  #deniedCost = 0;
  /** Local time the drain catches up with everything admitted, as last seen. */
  #drainedAt = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly ctx: EngineContext,
    readonly rule: LeakyBucketRule,
    readonly key: string,
    readonly storageKey: string,
  ) {}

  async consume(cost: number, check?: Check): Promise<Consumed> {
    const { cancel, delayMs: _, ...decision } = await this.reserve(cost, 0, check);
    if (!decision.allowed) return { decision };
    const refund = () => {
      void cancel();
      return refunded(decision, cost, Math.max(0, decision.resetMs - Math.ceil(drainMs(cost, this.rule))));
    };
    return { decision, refund };
  }

  /** `check`: the caller's check of a multi-rule consume, for observers. */
  async reserve(cost: number, maxWaitMs = this.rule.maxWaitMs, check?: Check): Promise<Reservation> {
    const { ctx, rule } = this;
    const sentAt = ctx.now();
    const answer = (storeWaits: number, decision: Decision) => ctx.answer(storeWaits, cost, check, decision);
    // Even an empty bucket makes a request above the burst wait for the excess to drain.
    if (drainMs(cost - rule.burst, rule) > maxWaitMs) {
      return refused(answer(0, this.#decision(sentAt, false, Number.POSITIVE_INFINITY)));
    }
    if (cost >= this.#deniedCost && this.#deniedUntil - sentAt > maxWaitMs) {
      return refused(answer(0, this.#decision(sentAt, false, this.#deniedUntil - sentAt - maxWaitMs)));
    }
    const request = { rate: rule.rate, periodMs: rule.periodMs, burst: rule.burst, cost, maxWaitMs };
    const result = await storeCall(ctx, leakyBucketReserve, this.storageKey, request);
    const now = ctx.now();
    if (!result.allowed) {
      this.#drainedAt = sentAt + result.backlogMs;
      this.#deniedUntil = sentAt + result.delayMs;
      this.#deniedCost = cost;
      return refused(answer(1, this.#decision(now, false, this.#deniedUntil - now - maxWaitMs)));
    }
    this.#drainedAt = sentAt + result.backlogMs;
    let cancelled = false;
    const cancel = async () => {
      if (cancelled) return;
      cancelled = true;
      const back = { rate: rule.rate, periodMs: rule.periodMs, cost };
      const call = storeCall(ctx, leakyBucketCancel, this.storageKey, back).catch(() => {});
      ctx.track(call);
      await call;
    };
    // The delay counts from the store's decision; waiting it from the reply is late, never early.
    return decisionWith(answer(1, this.#decision(now, true, 0)), { delayMs: result.delayMs, cancel });
  }

  returnUnused(): void {}

  sweep(now: number): boolean {
    return now >= this.#deniedUntil && now >= this.#drainedAt;
  }

  #decision(now: number, allowed: boolean, retryAfterMs: number): Decision {
    const { rule } = this;
    const backlogMs = Math.max(0, this.#drainedAt - now);
    const queued = (backlogMs * rule.rate) / rule.periodMs;
    return {
      allowed,
      policy: rule.name,
      key: this.key,
      limit: rule.burst,
      remaining: Math.max(0, Math.floor(rule.burst - queued)),
      resetMs: Math.ceil(backlogMs),
      retryAfterMs: allowed ? 0 : retryAfter(retryAfterMs),
    };
  }
}

function refused(decision: Decision): Reservation {
  return decisionWith(decision, { delayMs: 0, cancel: async () => {} });
}

export const leakyBucketEngine: Engine<LeakyBucketRule> = {
  open: (ctx, rule, key, storageKey) => new LeakyBucketKey(ctx, rule, key, storageKey),
  methods: ['consume', 'reserve'],
  describe: (rule) => ({ limit: rule.burst, windowSeconds: seconds(drainMs(rule.burst, rule)) }),
};
