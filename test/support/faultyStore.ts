import { StoreTimeoutError, StoreUnavailableError } from '../../src/errors.js';
import type { Operation, Store } from '../../src/stores/store.js';

/**
 * How calls fail: `'down'` refuses without running (a connection that is not there),
 * `'lost-reply'` runs the operation and then reports a timeout (the reply never arrived).
 */
export type Fault = 'none' | 'down' | 'lost-reply';

/**
 * Injects failures in front of a real store (the library's MemoryStore), so the limiter's failure
 * handling can be tested step by step on a virtual clock. The same behaviours run against real
 * redis-server processes that are killed and paused in test/redis/outage.test.ts.
 */
export class FaultyStore implements Store {
  fault: Fault = 'none';
  /** When set, only these scripts (operation names) fail; others pass. */
  only: string | undefined;
  /** Which shard (e.g. Cluster node) a key lives on; one shard unless set. */
  shard: ((key: string) => string) | undefined;
  /** When set, only keys of this shard fail. */
  faultyShard: string | undefined;
  /** Calls that reached this store (whether or not they failed). */
  calls = 0;
  /** Operations that actually ran on the inner store, by script name. */
  readonly applied = new Map<string, number>();

  constructor(readonly inner: Store) {}

  async run<S, Req, Res>(op: Operation<S, Req, Res>, key: string, req: Req): Promise<Res> {
    this.calls++;
    const scoped =
      (this.only === undefined || this.only === op.script) &&
      (this.faultyShard === undefined || this.faultyShard === this.shardOf(key));
    const fault = scoped ? this.fault : 'none';
    if (fault === 'down') throw new StoreUnavailableError('injected: store down');
    const result = await this.inner.run(op, key, req);
    this.applied.set(op.script, (this.applied.get(op.script) ?? 0) + 1);
    if (fault === 'lost-reply') throw new StoreTimeoutError(10);
    return result;
  }

  shardOf(key: string): string {
    return this.shard?.(key) ?? this.inner.shardOf?.(key) ?? '';
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}
