import { type Duration, parseDuration } from './duration.js';
import { ConfigError, StoreUnavailableError } from './errors.js';
import type { Operation, RunOptions, Store } from './stores/store.js';

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
    const failures = options.failures ?? 3;
    if (typeof failures !== 'number' || !Number.isInteger(failures) || failures < 1) {
      throw new ConfigError('breaker.failures', `expected an integer from 1 and up, got ${String(failures)}`);
    }
    this.failures = failures;
    this.coolDownMs = parseDuration(options.coolDown ?? '250ms', 'breaker.coolDown');
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

  failure(): void {
    this.#consecutive++;
    if (this.#state === 'half-open' || (this.#state === 'closed' && this.#consecutive >= this.failures)) {
      this.#state = 'open';
      this.#openedAt = this.#now();
    }
  }
}

/**
 * A store behind breakers, one per shard (`Store.shardOf`): calls to a suspended shard fail fast
 * with `StoreUnavailableError`, while the other shards keep working.
 */
export class GuardedStore implements Store {
  /** Calls rejected without reaching the store. */
  shortCircuited = 0;
  readonly coolDownMs: number;
  readonly #breakers = new Map<string, CircuitBreaker>();
  readonly #options: BreakerOptions;
  readonly #now: () => number;
  #reported: BreakerState = 'closed';

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
    const first = new CircuitBreaker(options, now);
    this.#breakers.set('', first);
    this.coolDownMs = first.coolDownMs;
    this.#options = options;
    this.#now = now;
  }

  /** The breaker of the shard `key` belongs to. */
  breakerFor(key: string): CircuitBreaker {
    const shard = this.inner.shardOf?.(key) ?? '';
    let breaker = this.#breakers.get(shard);
    if (!breaker) {
      breaker = new CircuitBreaker(this.#options, this.#now);
      this.#breakers.set(shard, breaker);
    }
    return breaker;
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

  /** The worst state over all shards. */
  state(): BreakerState {
    let worst: BreakerState = 'closed';
    for (const b of this.#breakers.values()) {
      if (b.state === 'open') return 'open';
      if (b.state === 'half-open') worst = 'half-open';
    }
    return worst;
  }

  async run<S, Req, Res>(
    op: Operation<S, Req, Res>,
    key: string,
    req: Req,
    options?: RunOptions,
  ): Promise<Res> {
    const breaker = this.breakerFor(key);
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
      breaker.failure();
      this.#report();
      throw err;
    }
    breaker.success();
    this.#report();
    this.onSuccess();
    return result;
  }

  #report(): void {
    const state = this.state();
    if (state === this.#reported) return;
    this.#reported = state;
    this.onStateChange(state);
  }

  shardOf(key: string): string {
    return this.inner.shardOf?.(key) ?? '';
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}
