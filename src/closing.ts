import type { GuardedStore } from './breaker.js';
import { StoreUnavailableError } from './errors.js';
import type { Operation, RunOptions, Store } from './stores/store.js';

/** Pause between tries of a call that was not sent while its breaker is closed (connection down). */
const RETRY_MS = 25;

/**
 * The store as a closing limiter uses it. Until `closing()`, calls pass through unchanged. From then
 * on, until the close deadline, a call waits for its answer up to the deadline instead of one store
 * timeout, and a call that certainly did not run (`StoreUnavailableError`: breaker open, connection
 * down, an earlier call for its key still unanswered) is tried again, so what `close()` hands back
 * during a short stall still reaches the store. A call that may have run is never sent twice.
 * A call the open breaker would refuse waits for the breaker's next probe (`whenPassable`), not a
 * timer: trying every 25 ms, 2 000 held keys made ~67 760 refused calls in one close(). At the
 * deadline every call still waiting fails at once with one shared error; after it, a call the
 * breaker would refuse fails with that error too, and others go as they did before close.
 *
 * The deadline is real time (`performance.now()`), not the limiter's clock: it bounds how long
 * `close()` waits on timers, and a simulator's virtual clock does not move while it waits.
 */
export class ClosingStore implements Store {
  /**
   * Set by `closing()`: the deadline, and whether its timer has fired. The flag, not the time,
   * says that nothing may wait any more: a timer can fire a little before `performance.now()`
   * reaches the deadline, and a call that started waiting then would wait past it, for the
   * breaker's next probe.
   */
  #close: { readonly deadline: number; expired: boolean } | undefined;
  #timer: NodeJS.Timeout | undefined;
  readonly #gaveUp: StoreUnavailableError;

  constructor(
    readonly inner: GuardedStore,
    private readonly closeTimeoutMs: number,
  ) {
    this.#gaveUp = new StoreUnavailableError(
      `close() gave up handing back after closeTimeoutMs (${closeTimeoutMs} ms): the store did not take the call`,
    );
  }

  /** `close()` has started: calls may take until `closeTimeoutMs` from now. */
  closing(): void {
    if (this.#close !== undefined) return;
    const close = { deadline: performance.now() + this.closeTimeoutMs, expired: false };
    this.#close = close;
    // Every call still waiting for a breaker wakes, sees the deadline passed and gives up. One
    // wake-up for all, rather than each call racing its wait with the deadline: that race took
    // four promises per call, and ~94 000 waiting hand-backs spent most of close() in GC.
    this.#timer = setTimeout(() => {
      close.expired = true;
      this.inner.wakeWaiters();
    }, this.closeTimeoutMs);
  }

  /** `close()` is done: nothing waits for the deadline any more. */
  closed(): void {
    clearTimeout(this.#timer);
  }

  async run<S, Req, Res>(
    op: Operation<S, Req, Res>,
    key: string,
    req: Req,
    options?: RunOptions,
  ): Promise<Res> {
    const close = this.#close;
    if (close === undefined) return this.inner.run(op, key, req, options);
    for (;;) {
      const left = close.deadline - performance.now();
      // Not even tried while the breaker would refuse it: each refusal builds an error of its own
      // (its stack trace), which for ~94 000 keys took ~0.5 s of CPU, past the deadline.
      if (close.expired || left <= 0) {
        if (!this.inner.wouldPass(key)) throw this.#gaveUp;
        return this.inner.run(op, key, req, options);
      }
      if (!this.inner.wouldPass(key)) {
        await this.inner.whenPassable(key);
        continue;
      }
      try {
        return await this.inner.run(op, key, req, { ...options, timeoutMs: Math.ceil(left) });
      } catch (err) {
        if (!(err instanceof StoreUnavailableError)) throw err;
        if (this.inner.suspended(key)) await this.inner.whenPassable(key);
        else await new Promise((resolve) => setTimeout(resolve, Math.min(RETRY_MS, left)));
      }
    }
  }

  shardOf(key: string): string {
    return this.inner.shardOf(key);
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}
