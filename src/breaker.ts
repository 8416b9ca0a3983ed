import { type Duration, parseDuration } from './duration.js';
import { ConfigError, StoreUnavailableError } from './errors.js';
import type { Operation, Store } from './stores/store.js';

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

/** A store behind a breaker: calls fail fast with `StoreUnavailableError` while it is open. */
export class GuardedStore implements Store {
  /** Calls rejected without reaching the store. */
  shortCircuited = 0;

  constructor(
    readonly inner: Store,
    readonly breaker: CircuitBreaker,
    private readonly onSuccess: () => void,
  ) {}

  async run<S, Req, Res>(op: Operation<S, Req, Res>, key: string, req: Req): Promise<Res> {
    if (!this.breaker.tryPass()) {
      this.shortCircuited++;
      throw new StoreUnavailableError(
        `Store calls are suspended after ${this.breaker.failures} failures; next probe in ${Math.ceil(this.breaker.msUntilProbe())} ms`,
      );
    }
    let result: Res;
    try {
      result = await this.inner.run(op, key, req);
    } catch (err) {
      this.breaker.failure();
      throw err;
    }
    this.breaker.success();
    this.onSuccess();
    return result;
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}
