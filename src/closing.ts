import { StoreUnavailableError } from './errors.js';
import type { Operation, RunOptions, Store } from './stores/store.js';

/** Pause between tries of a call that was not sent: no network is touched while a breaker is open. */
const RETRY_MS = 25;

/**
 * The store as a closing limiter uses it. Until `closing()`, calls pass through unchanged. From then
 * on, until the close deadline, a call waits for its answer up to the deadline instead of one store
 * timeout, and a call that certainly did not run (`StoreUnavailableError`: breaker open, connection
 * down, an earlier call for its key still unanswered) is tried again, so what `close()` hands back
 * during a short stall still reaches the store. A call that may have run is never sent twice.
 * After the deadline calls go as they did before close.
 *
 * The deadline is real time (`performance.now()`), not the limiter's clock: it bounds how long
 * `close()` waits on timers, and a simulator's virtual clock does not move while it waits.
 */
export class ClosingStore implements Store {
  #deadline: number | undefined;

  constructor(
    readonly inner: Store,
    private readonly closeTimeoutMs: number,
  ) {}

  /** `close()` has started: calls may take until `closeTimeoutMs` from now. */
  closing(): void {
    this.#deadline ??= performance.now() + this.closeTimeoutMs;
  }

  async run<S, Req, Res>(
    op: Operation<S, Req, Res>,
    key: string,
    req: Req,
    options?: RunOptions,
  ): Promise<Res> {
    for (;;) {
      const left = this.#deadline === undefined ? 0 : this.#deadline - performance.now();
      if (left <= 0) return this.inner.run(op, key, req, options);
      try {
        return await this.inner.run(op, key, req, { ...options, timeoutMs: Math.ceil(left) });
      } catch (err) {
        if (!(err instanceof StoreUnavailableError) || (this.#deadline ?? 0) - performance.now() < RETRY_MS) {
          throw err;
        }
        await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
      }
    }
  }

  shardOf(key: string): string {
    return this.inner.shardOf?.(key) ?? '';
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}
