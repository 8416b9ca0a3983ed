import type { Operation, RunOptions, Store } from '../src/index.js';
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

function isSync(store: SyncStore | Store): store is SyncStore {
  return typeof (store as Partial<SyncStore>).runSync === 'function';
}

/**
 * A shared store seen through a network: the operation applies half a round trip after the call
 * and the reply arrives half a round trip later, so lease requests from instances race as they do
 * against a real Redis.
 *
 * The inner store is either synchronous (`MemoryStore.runSync`) or a real one (`RedisStore` given the
 * virtual clock): then the apply event returns the real call's promise, and the clock does not move
 * until Redis has answered, so a run on Redis sees the same virtual timeline as one in memory.
 */
export class LatencyStore implements Store {
  readonly calls = { count: 0, roundTrips: 0 };

  constructor(
    private readonly inner: SyncStore | Store,
    private readonly clock: VirtualClock,
    private readonly latency: LatencyModel,
    private readonly random: () => number,
    /** Told of every call, as it is made. */
    private readonly onCall: () => void = () => {},
  ) {}

  /**
   * One gateway's connection to the shared store. Its calls made at the same virtual instant (one
   * event-loop turn) count as one round trip, as RedisStore sends them in one batch.
   */
  link(): Store {
    let lastInstant = Number.NaN;
    return {
      run: (op, key, req, options) => {
        if (this.clock.now() !== lastInstant) {
          lastInstant = this.clock.now();
          this.calls.roundTrips++;
        }
        return this.run(op, key, req, options);
      },
      close: async () => {},
    };
  }

  run<S, Req, Res>(op: Operation<S, Req, Res>, key: string, req: Req, options?: RunOptions): Promise<Res> {
    this.calls.count++;
    this.onCall();
    const rtt = this.latency.meanMs * (1 + this.latency.jitter * (2 * this.random() - 1));
    const inner = this.inner;
    return new Promise((resolve, reject) => {
      const reply = (result: Res) => this.clock.after(rtt / 2, () => resolve(result));
      this.clock.after(rtt / 2, () => {
        if (!isSync(inner)) return inner.run(op, key, req, options).then(reply, reject);
        try {
          reply(inner.runSync(op, key, req));
        } catch (err) {
          reject(err);
        }
      });
    });
  }

  async close(): Promise<void> {}
}
