/**
 * What every key state that leases from the store does the same way, whatever it leases: tokens
 * of a bucket or a window (`LeasedKey`, the consume algorithms' core) or concurrency slots
 * (`ConcurrencyKey`, which hands them back when released instead of spending them).
 *
 * - **Single-flight acquisition:** one store call per key in flight; concurrent misses share it,
 *   and `close()` waits for it.
 * - **Slow start:** each lease doubles the last one granted, from 1 for a key without history;
 *   requests already waiting are asked for in full (`waiting`).
 * - **Grants:** counted and told to observers; one that lands on a state the LRU dropped while
 *   the call was in flight is handed back once the requests that waited for it took their share.
 * - **Decisions:** limit, remaining (clamped to 0..limit) and retry time in one shape.
 *
 * A base class rather than a part each state holds: the key state is the one object per key, so
 * the hot path follows no extra pointer and a table of 100k keys holds no extra object per key.
 */
import type { Decision } from '../decision.js';
import { leaseSize } from '../demand.js';
import type { ReturnReason } from '../observe/events.js';
import type { Rule } from '../policy.js';
import { type EngineContext, type KeyState, retryAfter } from './engine.js';

export abstract class LeaseHolder<R extends Rule, Acquired> implements KeyState {
  lruTouch = 0;
  nextCheck: KeyState | undefined = undefined;
  /** The acquisition in flight, shared by every request that misses meanwhile. */
  protected inflight: Promise<Acquired> | undefined;
  /** Size of the last lease granted, which slow start doubles. */
  protected lastGrant = 0;
  /**
   * The cost of the requests waiting on the acquisition in flight, each counted until its own
   * continuation resumes (not in a callback of the acquisition: those all run before the first
   * waiter retries, and the retry would see none of the others). The next acquisition asks
   * for all of it whatever slow start says: it is demand already here, spent the moment the grant
   * lands, not a forecast that could leave units idle. Sized by slow start alone, a burst of
   * simultaneous requests (a new key, a cold start) got 1, 2, 4 … units per round trip, and all
   * but 255 were refused once they had waited `MAX_ATTEMPTS` rounds, with the limit far away.
   */
  protected waiting = 0;

  constructor(
    protected readonly ctx: EngineContext,
    readonly rule: R,
    readonly key: string,
    readonly storageKey: string,
  ) {}

  abstract returnUnused(reason: ReturnReason): void;
  abstract sweep(now: number): boolean;

  /** Most units a decision may cost; `remaining` never exceeds it. */
  protected abstract get limit(): number;
  /** What is left for this instance as it knows it now (before clamping). */
  protected abstract remainingAt(now: number): number;
  /** `resetMs` of a decision that leaves `remaining`. */
  protected abstract resetMs(now: number, remaining: number): number;

  /**
   * Single-flight: starts an acquisition unless one is in flight, in which case the caller shares
   * that one. `settled` runs as it settles, before another can start.
   */
  protected acquireOnce(start: () => Promise<Acquired>, settled?: () => void): Promise<Acquired> {
    if (this.inflight) return this.inflight;
    const call = start().finally(() => {
      this.inflight = undefined;
      settled?.();
    });
    this.inflight = call;
    this.ctx.track(call);
    return call;
  }

  /** The next lease's size: double the last one, at most `cap` and what `demand` asks for. */
  protected nextLease(cap: number, demand?: number): number {
    return leaseSize(this.lastGrant, cap, demand);
  }

  /** Records a lease of `units` the store granted: counted, and told to observers. */
  protected granted(units: number): void {
    const { ctx } = this;
    ctx.stats.leasesGranted++;
    ctx.stats.tokensLeased += units;
    ctx.telemetry.leaseGranted(this.rule.name, this.key, units);
    this.lastGrant = units;
    // Evicted or closed while the call was in flight: the requests waiting for this call are
    // served first (their continuations run before the immediate), then the rest goes back.
    if (ctx.peek(this.storageKey) === this) return;
    const handedBack = new Promise<void>((resolve) =>
      setImmediate(() => {
        this.returnUnused('orphaned');
        resolve();
      }),
    );
    ctx.track(handedBack);
  }

  protected decision(now: number, allowed: boolean, retryAfterMs: number): Decision {
    const limit = this.limit;
    const remaining = Math.max(0, Math.min(limit, Math.floor(this.remainingAt(now))));
    return {
      allowed,
      policy: this.rule.name,
      key: this.key,
      limit,
      remaining,
      resetMs: this.resetMs(now, remaining),
      retryAfterMs: allowed ? 0 : retryAfter(retryAfterMs),
      // Set by `ctx.answer`; a field of the literal so that setting it keeps the object's shape.
      source: undefined,
    };
  }
}
