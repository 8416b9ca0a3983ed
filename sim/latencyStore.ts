import type { Operation, Store } from '../src/index.js';
import type { VirtualClock } from './clock.js';

export interface LatencyModel {
  /** Mean round trip in ms. */
  meanMs: number;
  /** Uniform jitter as a fraction of the mean (0.5 = ±50 %). */
  jitter: number;
}

/** Anything that applies an operation synchronously at the current virtual time. */
export interface SyncStore {
  runSync<S, Req, Res>(op: Operation<S, Req, Res>, key: string, req: Req): Res;
}

/**
 * A shared store seen through a network: the operation applies half a round trip after the call
 * and the reply arrives half a round trip later, so lease requests from instances race as they do
 * against a real Redis.
 */
export class LatencyStore implements Store {
  readonly calls = { count: 0 };

  constructor(
    private readonly inner: SyncStore,
    private readonly clock: VirtualClock,
    private readonly latency: LatencyModel,
    private readonly random: () => number,
  ) {}

  run<S, Req, Res>(op: Operation<S, Req, Res>, key: string, req: Req): Promise<Res> {
    this.calls.count++;
    const rtt = this.latency.meanMs * (1 + this.latency.jitter * (2 * this.random() - 1));
    return new Promise((resolve, reject) => {
      this.clock.after(rtt / 2, () => {
        try {
          const result = this.inner.runSync(op, key, req);
          this.clock.after(rtt / 2, () => resolve(result));
        } catch (err) {
          reject(err);
        }
      });
    });
  }

  async close(): Promise<void> {}
}
