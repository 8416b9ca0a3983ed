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
  /** Set by `closing()`: the deadline, and a promise resolved then (what still waits gives up). */
  #close: { readonly deadline: number; readonly expired: Promise<void> } | undefined;
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
    const deadline = performance.now() + this.closeTimeoutMs;
    const expired = new Promise<void>((resolve) => {
      this.#timer = setTimeout(resolve, this.closeTimeoutMs);
    });
    this.#close = { deadline, expired };
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
      if (left <= 0) {
        if (!this.inner.wouldPass(key)) throw this.#gaveUp;
        return this.inner.run(op, key, req, options);
      }
      if (!this.inner.wouldPass(key)) {
        await this.#whenPassable(this.inner.whenPassable(key), close.expired);
        continue;
      }
      try {
        return await this.inner.run(op, key, req, { ...options, timeoutMs: Math.ceil(left) });
      } catch (err) {
        if (!(err instanceof StoreUnavailableError)) throw err;
        await this.#whenPassable(
          this.inner.suspended(key)
            ? this.inner.whenPassable(key)
            : new Promise((resolve) => setTimeout(resolve, RETRY_MS)),
          close.expired,
        );
      }
    }
  }

  /** Waits for `passable`, or throws the shared error if the deadline (`expired`) comes first. */
  async #whenPassable(passable: Promise<unknown>, expired: Promise<void>): Promise<void> {
    const woke = await Promise.race([passable.then(() => true), expired.then(() => false)]);
    if (!woke) throw this.#gaveUp;
  }

  shardOf(key: string): string {
    return this.inner.shardOf(key);
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}
