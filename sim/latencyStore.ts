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

/** One gateway's connection to the shared store. */
export interface Link extends Store {
  /**
   * The round trip of the batch this gateway has sent at the current virtual instant (every call
   * it makes at one instant travels in it, as RedisStore sends one event-loop turn's calls in one
   * batch); undefined when it has made no call at this instant.
   */
  batchRoundTripMs(): number | undefined;
}

/** One round trip drawn from the model, in ms. */
export function drawRoundTrip(latency: LatencyModel, random: () => number): number {
  return latency.meanMs * (1 + latency.jitter * (2 * random() - 1));
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
   * One gateway's connection. Its calls made at the same virtual instant (one event-loop turn) are
   * one batch: they count as one round trip and share its latency, drawn at its first call.
   */
  link(): Link {
    let batchAt = Number.NaN;
    let batchRtt = 0;
    return {
      batchRoundTripMs: () => (batchAt === this.clock.now() ? batchRtt : undefined),
      run: (op, key, req, options) => {
        if (this.clock.now() !== batchAt) {
          batchAt = this.clock.now();
          batchRtt = drawRoundTrip(this.latency, this.random);
          this.calls.roundTrips++;
        }
        return this.#send(op, key, req, options, batchRtt);
      },
      close: async () => {},
    };
  }

  run<S, Req, Res>(op: Operation<S, Req, Res>, key: string, req: Req, options?: RunOptions): Promise<Res> {
    return this.#send(op, key, req, options, drawRoundTrip(this.latency, this.random));
  }

  #send<S, Req, Res>(
    op: Operation<S, Req, Res>,
    key: string,
    req: Req,
    options: RunOptions | undefined,
    rtt: number,
  ): Promise<Res> {
    this.calls.count++;
    this.onCall();
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
