/**
 * Sliding log engine: always exact (it exists for exactness), so every decision is one store call —
 * trim, count and append in one script. What stays local is the deny cache: a refused key is
 * answered from memory until enough old entries have left the window.
 */
import type { Check, Decision } from '../decision.js';
import type { SlidingLogRule } from '../policy.js';
import {
  quantisedLogAcquire,
  quantisedLogRelease,
  slidingLogAcquire,
  slidingLogRelease,
} from '../stores/slidingLogOps.js';
import {
  backgroundCall,
  type Consumed,
  type Engine,
  type EngineContext,
  type KeyState,
  refunded,
  retryAfter,
  seconds,
  storeCall,
} from './engine.js';

class SlidingLogKey implements KeyState {
  /** A refusal of `#deniedCost` units holds until this local time. */
  #deniedUntil = 0;
  #deniedCost = 0;
  /** What the last store reply said, in local time. */
  #count = 0;
  #resetAt = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly ctx: EngineContext,
    readonly rule: SlidingLogRule,
    readonly key: string,
    readonly storageKey: string,
  ) {}

  async consume(cost: number, check?: Check): Promise<Consumed> {
    const { ctx, rule } = this;
    const sentAt = ctx.now();
    const answer = (storeWaits: number, decision: Decision) => ctx.answer(storeWaits, cost, check, decision);
    if (cost > rule.limit) {
      return { decision: answer(0, this.#decision(sentAt, false, Number.POSITIVE_INFINITY)) };
    }
    if (sentAt < this.#deniedUntil && cost >= this.#deniedCost) {
      return { decision: answer(0, this.#decision(sentAt, false, this.#deniedUntil - sentAt)) };
    }
    const { limit, windowMs } = rule;
    let giveBack: () => void;
    let result: { allowed: boolean; count: number; retryMs: number; resetMs: number };
    if (rule.quantumMs > 0) {
      const r = await storeCall(ctx, quantisedLogAcquire, this.storageKey, {
        limit,
        windowMs,
        cost,
        quantumMs: rule.quantumMs,
      });
      const release = { windowMs: rule.windowMs, quantumMs: rule.quantumMs, bucket: r.bucket, cost };
      giveBack = () => backgroundCall(ctx, quantisedLogRelease, this.storageKey, release);
      result = r;
    } else {
      const id = ctx.nextId();
      result = await storeCall(ctx, slidingLogAcquire, this.storageKey, { limit, windowMs, cost, id });
      giveBack = () =>
        backgroundCall(ctx, slidingLogRelease, this.storageKey, { windowMs: rule.windowMs, cost, id });
    }
    this.#count = result.count;
    this.#resetAt = sentAt + result.resetMs;
    const now = ctx.now();
    if (result.allowed) {
      const decision = answer(1, this.#decision(now, true, 0));
      const refund = () => {
        giveBack();
        return refunded(decision, cost);
      };
      return { decision, refund };
    }
    this.#deniedUntil = sentAt + result.retryMs;
    this.#deniedCost = cost;
    return { decision: answer(1, this.#decision(now, false, this.#deniedUntil - now)) };
  }

  returnUnused(): void {}

  sweep(now: number): boolean {
    return now >= this.#deniedUntil;
  }

  #decision(now: number, allowed: boolean, retryAfterMs: number): Decision {
    const { rule } = this;
    return {
      allowed,
      policy: rule.name,
      key: this.key,
      limit: rule.limit,
      remaining: Math.max(0, rule.limit - this.#count),
      resetMs: Math.max(0, Math.ceil(this.#resetAt - now)),
      retryAfterMs: allowed ? 0 : retryAfter(retryAfterMs),
    };
  }
}

export const slidingLogEngine: Engine<SlidingLogRule> = {
  open: (ctx, rule, key, storageKey) => new SlidingLogKey(ctx, rule, key, storageKey),
  methods: ['consume'],
  describe: (rule) => ({ limit: rule.limit, windowSeconds: seconds(rule.windowMs) }),
};
