import { type Duration, parseDuration, TIMED } from './duration.js';
import { StoreOverloadError, StoreUnavailableError } from './errors.js';
import { countOption } from './options.js';
import type { Operation, RunOptions, Store } from './stores/store.js';
import { tokenBucketRelease } from './stores/tokenBucketOps.js';

export interface BreakerOptions {
  /**
   * Consecutive failed store calls that open the breaker. While open, store calls fail at once
   * without touching the network, so an outage costs the hot path nothing after these failures.
   * @default 3
   */
  failures?: number;
  /**
   * How long an open breaker rejects calls before it lets one through as a probe (half-open). A
   * successful probe closes it; a failed one opens it for another cool-down.
   * @default '250ms'
   */
  coolDown?: Duration;
}

export type BreakerState = 'closed' | 'open' | 'half-open';

/**
 * A circuit breaker on an injected clock: closed (calls pass) → open after `failures` consecutive
 * failures (calls rejected) → half-open after `coolDown` (exactly one probe passes) → closed on its
 * success, open again on its failure.
 */
export class CircuitBreaker {
  readonly failures: number;
  readonly coolDownMs: number;
  readonly #now: () => number;
  #state: BreakerState = 'closed';
  #consecutive = 0;
  #openedAt = 0;

  constructor(options: BreakerOptions, now: () => number) {
    this.failures = countOption(options.failures ?? 3, 'breaker.failures');
    this.coolDownMs = parseDuration(options.coolDown ?? '250ms', 'breaker.coolDown', TIMED);
    this.#now = now;
  }

  get state(): BreakerState {
    return this.#state;
  }

  /** Whether a call may go to the store now. In half-open, true once: for the probe. */
  tryPass(): boolean {
    if (this.#state === 'closed') return true;
    if (this.#state === 'half-open' || this.msUntilProbe() > 0) return false;
    this.#state = 'half-open';
    return true;
  }

  /** Milliseconds until an open breaker lets a probe through; 0 when closed or due. */
  msUntilProbe(): number {
    if (this.#state === 'closed') return 0;
    return Math.max(0, this.#openedAt + this.coolDownMs - this.#now());
  }

  success(): void {
    this.#state = 'closed';
    this.#consecutive = 0;
  }

  /**
   * The call was not sent because of the instance's own backlog (`StoreOverloadError`): it says
   * nothing of the store, so it is no failure; a probe that ended so just did not probe.
   */
  inconclusive(): void {
    if (this.#state !== 'half-open') return;
    this.#state = 'open';
    this.#openedAt = this.#now();
  }

  failure(): void {
    this.#consecutive++;
    if (this.#state === 'half-open' || (this.#state === 'closed' && this.#consecutive >= this.failures)) {
      this.#state = 'open';
      this.#openedAt = this.#now();
    }
  }
}

/** How a shard's breaker is known: by the last key routed to it, to tell whether keys still map there. */
interface Shard {
  readonly breaker: CircuitBreaker;
  /** The last key whose calls went through this breaker. */
  lastKey: string;
  /** When a call last asked this breaker (the limiter's clock). */
  askedAt: number;
  /** Calls waiting for the breaker to let them through (`whenPassable`), first come first woken. */
  readonly waiters: (() => void)[];
  /** Wakes a waiter when the probe is due; set while there are waiters and the breaker is not closed. */
  wake: NodeJS.Timeout | undefined;
}

/**
 * A store behind breakers, one per shard (`Store.shardOf`): calls to a suspended shard fail fast
 * with `StoreUnavailableError`, while the other shards keep working.
 *
 * A shard's breaker stays truthful without traffic to it. Shards move: after a Cluster failover
 * the keys of a dead master map to its promoted replica, so the old master's breaker would stay
 * open forever. While any breaker is open, a timer runs every cool-down: it forgets breakers that
 * no key maps to any more (their last key now lives elsewhere) and probes an open shard that no
 * call asked for a whole cool-down, with a read-only call on a key of its slot, which closes the
 * breaker when the shard answers. Under traffic, calls probe as before and the timer sends nothing.
 */
export class GuardedStore implements Store {
  /** Calls rejected without reaching the store. */
  shortCircuited = 0;
  readonly coolDownMs: number;
  readonly #shards = new Map<string, Shard>();
  readonly #options: BreakerOptions;
  readonly #now: () => number;
  #reported: BreakerState = 'closed';
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;

  /**
   * `onSuccess` runs after every call that succeeded; `onStateChange` whenever the worst state
   * over the shards changes.
   */
  constructor(
    readonly inner: Store,
    options: BreakerOptions,
    now: () => number,
    private readonly onSuccess: () => void,
    private readonly onStateChange: (state: BreakerState) => void,
  ) {
    // Validates the options once, eagerly; every shard's breaker is built from the same ones.
    this.coolDownMs = new CircuitBreaker(options, now).coolDownMs;
    this.#options = options;
    this.#now = now;
  }

  /** The breaker of the shard `key` belongs to. */
  breakerFor(key: string): CircuitBreaker {
    return this.#shardFor(key).breaker;
  }

  #shardFor(key: string): Shard {
    const id = this.shardOf(key);
    let shard = this.#shards.get(id);
    if (!shard) {
      shard = {
        breaker: new CircuitBreaker(this.#options, this.#now),
        lastKey: key,
        askedAt: this.#now(),
        waiters: [],
        wake: undefined,
      };
      this.#shards.set(id, shard);
    }
    return shard;
  }

  /** Whether calls for `key` are suspended or probing (its shard's breaker is not closed). */
  suspended(key: string): boolean {
    return this.breakerFor(key).state !== 'closed';
  }

  /** Whether a call for `key` made now would reach the store (possibly as the probe). */
  wouldPass(key: string): boolean {
    const breaker = this.breakerFor(key);
    return breaker.state === 'closed' || (breaker.state === 'open' && breaker.msUntilProbe() === 0);
  }

  /**
   * Resolves when a call for `key` may reach the store: at once while its breaker is closed; else
   * when the breaker closes, or, for one waiter at a time, when the breaker's probe is due (that
   * waiter's call is the probe). A caller that must get its call through (a closing limiter) waits
   * here instead of trying again and again calls the open breaker refuses.
   */
  whenPassable(key: string): Promise<void> {
    const shard = this.#shardFor(key);
    if (shard.breaker.state === 'closed') return Promise.resolve();
    return new Promise((resolve) => {
      shard.waiters.push(resolve);
      this.#wakeLater(shard);
    });
  }

  #wakeLater(shard: Shard): void {
    if (shard.wake !== undefined || shard.waiters.length === 0) return;
    const { breaker } = shard;
    // Half-open: another call is probing; its outcome is known within a cool-down at most.
    const ms = breaker.state === 'open' ? breaker.msUntilProbe() : this.coolDownMs;
    shard.wake = setTimeout(() => {
      shard.wake = undefined;
      if (breaker.state === 'closed') {
        this.#release(shard);
        return;
      }
      if (breaker.state === 'open' && breaker.msUntilProbe() === 0) shard.waiters.shift()?.();
      this.#wakeLater(shard);
    }, ms).unref();
  }

  /** Lets every waiter of `shard` through: its breaker closed (or the limiter stops). */
  #release(shard: Shard): void {
    clearTimeout(shard.wake);
    shard.wake = undefined;
    for (const resolve of shard.waiters.splice(0)) resolve();
  }

  /** The worst state over the shards that keys still map to. */
  state(): BreakerState {
    let worst: BreakerState = 'closed';
    for (const [id, shard] of this.#shards) {
      const state = shard.breaker.state;
      if (state === 'closed' || this.#orphaned(id, shard)) continue;
      if (state === 'open') return 'open';
      worst = 'half-open';
    }
    return worst;
  }

  async run<S, Req, Res>(
    op: Operation<S, Req, Res>,
    key: string,
    req: Req,
    options?: RunOptions,
  ): Promise<Res> {
    const shard = this.#shardFor(key);
    shard.lastKey = key;
    shard.askedAt = this.#now();
    return this.#call(shard, op, key, req, options);
  }

  async #call<S, Req, Res>(
    shard: Shard,
    op: Operation<S, Req, Res>,
    key: string,
    req: Req,
    options?: RunOptions,
  ) {
    const { breaker } = shard;
    const passed = breaker.tryPass();
    this.#report();
    if (!passed) {
      this.shortCircuited++;
      throw new StoreUnavailableError(
        `Store calls are suspended after ${breaker.failures} failures; next probe in ${Math.ceil(breaker.msUntilProbe())} ms`,
      );
    }
    let result: Res;
    try {
      result = await this.inner.run(op, key, req, options);
    } catch (err) {
      if (err instanceof StoreOverloadError) breaker.inconclusive();
      else breaker.failure();
      this.#report();
      throw err;
    }
    breaker.success();
    if (shard.waiters.length > 0) this.#release(shard);
    this.#report();
    this.onSuccess();
    return result;
  }

  /** Whether no key maps to this shard any more: its last key now lives on another one. */
  #orphaned(id: string, shard: Shard): boolean {
    return this.shardOf(shard.lastKey) !== id;
  }

  #report(): void {
    const state = this.state();
    if (state !== 'closed') this.#schedule();
    if (state === this.#reported) return;
    this.#reported = state;
    this.onStateChange(state);
  }

  #schedule(): void {
    if (this.#timer !== undefined || this.#stopped) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#tend();
    }, this.coolDownMs).unref();
  }

  /** The timer's round: forgets orphaned breakers, probes idle open shards, reports the result. */
  #tend(): void {
    const now = this.#now();
    for (const [id, shard] of this.#shards) {
      const { breaker } = shard;
      if (breaker.state === 'closed') continue;
      if (this.#orphaned(id, shard)) {
        this.#shards.delete(id);
        this.#release(shard); // their keys map to another shard now: they try that one
      } else if (
        breaker.state === 'open' &&
        breaker.msUntilProbe() === 0 &&
        now - shard.askedAt >= this.coolDownMs &&
        shard.waiters.length === 0 // a waiter's call is the probe
      ) {
        const key = probeKey(shard.lastKey);
        if (this.shardOf(key) === id) {
          // The outcome lands on the breaker (and in #report); nobody waits for it.
          this.#call(shard, tokenBucketRelease, key, PROBE, { background: true }).catch(() => {});
        }
      }
    }
    this.#report();
  }

  shardOf(key: string): string {
    return this.inner.shardOf?.(key) ?? '';
  }

  /** Lets every waiter of every shard go (a closing limiter's deadline passed): each asks again. */
  wakeWaiters(): void {
    for (const shard of this.#shards.values()) this.#release(shard);
  }

  /** Stops the probe timer (the limiter is closing) and lets every waiter go; calls still pass through. */
  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.wakeWaiters();
  }

  close(): Promise<void> {
    this.stop();
    return this.inner.close();
  }
}

/**
 * Returning nothing to a bucket that does not exist: the store reads the key and writes nothing,
 * so the probe leaves no state behind.
 */
const PROBE = { rate: 1, periodMs: 1, burst: 1, tokens: 0 };

/** A key in the same Cluster slot as `key` (same hash tag) that no limiter state uses. */
function probeKey(key: string): string {
  const end = key.startsWith('{') ? key.indexOf('}') : -1;
  return `${end > 1 ? key.slice(0, end + 1) : `{${key}}`}:breaker-probe`;
}
