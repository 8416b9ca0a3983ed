/**
 * Coalesces the store calls made at about the same moment into batches: one round trip carries
 * many keys' operations. Calls somebody waits for go out at the end of the current event-loop turn
 * (when every request that arrived in it has asked); background calls wait up to `maxWaitMs` for
 * company and never go ahead of a waiting call. A batch holds keys of one group only (a Redis
 * Cluster slot) and at most `maxItems` calls; per connection (`laneOf`), at most `maxInFlight`
 * batches with a waiting call are in flight, and apart from them at most half as many of background
 * calls only, so background work never takes the slot a waiting call needs.
 *
 * A call still queued `timeoutMs` after the end of the event-loop turn it was made in was never
 * sent, and fails: as overloaded (`StoreOverloadError`) when the store is answering and the calls
 * ahead of it took the time, as unavailable when the connection is not up or has gone quiet. Not of
 * the moment it was made: nothing can be sent before the turn ends, and a turn longer than
 * `timeoutMs` (a flood of new keys while the code is JIT-cold, synchronous work in the gateway) is
 * the gateway's time, not the store's.
 *
 * A sent batch times out (it may have run, and is never sent again) once its connection (`laneOf`)
 * has answered nothing for `timeoutMs` since the batch was written or since its last answer. Not
 * `timeoutMs` after it was written: a connection answers in order, so a batch behind a backlog of
 * others waits for them while Redis works through them, and counted from its write, 10 000 new keys
 * in one turn timed out a healthy store's batches and opened the breaker. A call's own `timeoutMs`
 * (a closing limiter's) stays a hard deadline.
 *
 * A key's calls go out one flush at a time: calls for a key with calls in flight wait for their
 * answer. Within a flush they run in the order they were made, background calls included: a
 * waiting call goes out at once, but does not overtake its key's refund made before it. A call timed out is not over: Redis may still run it (a `CLIENT PAUSE … WRITE` holds
 * every call until the pause lifts, then runs them all). So while a call for the key has timed
 * out unanswered, a new one fails at once as never sent: the fail policy answers it. An outage of
 * any length thus costs a key at most the calls of one flush per instance (one, with the limiter's
 * single flight per key). This needs `send`
 * to settle only when Redis answers or the connection drops, not at a client-side timeout.
 */
import pLimit, { type LimitFunction } from 'p-limit';
import { StoreOverloadError, StoreTimeoutError, StoreUnavailableError } from '../errors.js';
import { deadline } from './deadline.js';

/** One call waiting for its batch. */
export interface BatchItem {
  /** The key as the store writes it (prefix included): batches are cut by its group. */
  readonly key: string;
  readonly script: string;
  readonly args: readonly (string | number)[];
  readonly background: boolean;
  /** This call's timeout in ms, when not the batcher's. */
  readonly timeoutMs?: number;
  /** Settles the caller with the script's reply or an error. */
  settle(error: unknown, reply?: unknown): void;
}

/** The outcome of one item of a batch: its reply, or the error that failed it alone. */
export type ItemReply =
  | { readonly ok: true; readonly reply: unknown }
  | { readonly ok: false; readonly error: unknown };

export interface BatcherOptions {
  /** Sends one batch (all keys of one group); rejects when the whole batch failed. */
  send(items: readonly BatchItem[]): Promise<readonly ItemReply[]>;
  /** The group of a key: keys of different groups never share a batch. */
  groupOf(key: string): string;
  /** The connection a key's batch goes over (a Redis Cluster node): it answers its batches in order. */
  laneOf(key: string): string;
  /**
   * Whether a batch may go now. While not (the connection is still being set up), calls wait for
   * `ready()` within their timeout.
   */
  canSend(): boolean;
  timeoutMs: number;
  maxItems: number;
  maxWaitMs: number;
  maxInFlight: number;
}

/**
 * A call in the batcher. Its fields are copied one by one, not spread from the item: an object
 * spread and then given new properties leaves V8's fast shapes, and every batch reads these.
 */
class Pending implements BatchItem {
  readonly key: string;
  readonly script: string;
  readonly args: readonly (string | number)[];
  readonly background: boolean;
  readonly timeoutMs: number;
  /** Its own timeout was given (a closing limiter's): it holds even while the connection answers. */
  readonly hard: boolean;
  /** Put into a batch: its key is claimed until the batch is answered (or it expires unsent). */
  claimed = false;
  sent = false;
  done = false;
  /** The deadline, armed when the turn the call was made in ends (the batcher's first flush after it). */
  timer: NodeJS.Timeout | undefined = undefined;
  readonly #settle: BatchItem['settle'];

  constructor(
    item: BatchItem,
    timeoutMs: number,
    /** When the call was made, in calls: a batch runs its items in this order. */
    readonly made: number,
  ) {
    this.key = item.key;
    this.script = item.script;
    this.args = item.args;
    this.background = item.background;
    this.timeoutMs = timeoutMs;
    this.hard = item.timeoutMs !== undefined;
    this.#settle = item.settle;
  }

  arm(onTimeout: (p: Pending) => void): void {
    this.timer ??= deadline(this.timeoutMs, () => onTimeout(this));
  }

  /** Written to the connection: unless hard, its batch's watch (`Flight`) times it out from now on. */
  written(): void {
    this.sent = true;
    if (this.hard) return;
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  settle(error: unknown, reply?: unknown): void {
    if (this.done) return;
    this.done = true;
    clearTimeout(this.timer);
    this.#settle(error, reply);
  }
}

/**
 * A connection: its batch slots, its batches not yet answered, and when it last answered one. Slots
 * are per connection: a Cluster node that stopped answering holds its own batches, and the other
 * nodes' calls do not queue behind them.
 */
class Lane {
  readonly gate: LimitFunction;
  /** Batches of background calls only take at most half the slots: waiting calls always find one. */
  readonly backgroundGate: LimitFunction;
  /** When it last answered a batch. */
  heardAt = 0;
  /** A batch on it timed out, and it has answered nothing since. */
  late = false;

  constructor(maxInFlight: number) {
    this.gate = pLimit(maxInFlight);
    this.backgroundGate = pLimit(Math.max(1, Math.floor(maxInFlight / 2)));
  }
}

/** A batch written and not yet answered, with the one watch that times out its calls. */
class Flight {
  answered = false;
  /** When a look found the connection quiet for `timeoutMs`: the next look, after a poll phase, decides. */
  quietAt: number | undefined = undefined;
  timer: NodeJS.Timeout | undefined = undefined;

  constructor(
    readonly lane: Lane,
    readonly items: readonly Pending[],
    readonly writtenAt: number,
  ) {}
}

export class Batcher {
  readonly #options: BatcherOptions;
  #foreground: Pending[] = [];
  #background: Pending[] = [];
  #made = 0;
  /**
   * Keys with calls in batches not yet answered, and how many: a later call for one waits. The
   * calls of one flush for a key go together (a batch runs them one after the other).
   */
  readonly #claimed = new Map<string, number>();
  /** Of those, keys whose call timed out: a new call for one fails at once, never sent. */
  readonly #stuck = new Set<string>();
  readonly #lanes = new Map<string, Lane>();
  #immediate: NodeJS.Immediate | undefined;
  #timer: NodeJS.Timeout | undefined;
  /** Batches sent so far: round trips, for stats. */
  batches = 0;

  constructor(options: BatcherOptions) {
    this.#options = options;
  }

  /** Queues one call; `item.settle` is called exactly once, within the timeout. */
  add(item: BatchItem): void {
    if (this.#stuck.has(item.key)) {
      item.settle(
        new StoreUnavailableError(
          'Store call not sent: an earlier call for this key timed out and the store has not answered it yet',
        ),
      );
      return;
    }
    const timeoutMs = item.timeoutMs ?? this.#options.timeoutMs;
    const pending = new Pending(item, timeoutMs, this.#made++);
    if (item.background) this.#background.push(pending);
    else this.#foreground.push(pending);
    this.#schedule();
  }

  /** The connection became ready: what waited for it goes now. */
  ready(): void {
    this.#schedule();
  }

  /** Fails every call not yet sent (the store is closing). */
  abort(error: unknown): void {
    for (const p of [...this.#foreground, ...this.#background]) p.settle(error);
    this.#foreground = [];
    this.#background = [];
  }

  #schedule(): void {
    if (this.#foreground.length > 0) {
      this.#immediate ??= setImmediate(() => {
        this.#immediate = undefined;
        this.#flush();
      });
    } else if (this.#background.length > 0) {
      this.#timer ??= setTimeout(() => {
        this.#timer = undefined;
        this.#flush();
      }, this.#options.maxWaitMs);
    }
  }

  #flush(): void {
    for (const p of this.#foreground) p.arm(this.#expireOne);
    for (const p of this.#background) p.arm(this.#expireOne);
    if (!this.#options.canSend()) return;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    const queued = this.#queued().filter((p) => !p.done);
    this.#foreground = [];
    this.#background = [];
    const groups = new Map<string, Pending[]>();
    const flushed = new Set<string>();
    for (const p of queued) {
      if (this.#claimed.has(p.key) && !flushed.has(p.key)) {
        // Waits for the answer to its key's calls in flight (then `#schedule` runs again).
        (p.background ? this.#background : this.#foreground).push(p);
        continue;
      }
      flushed.add(p.key);
      this.#claimed.set(p.key, (this.#claimed.get(p.key) ?? 0) + 1);
      p.claimed = true;
      const group = this.#options.groupOf(p.key);
      const list = groups.get(group);
      if (list) list.push(p);
      else groups.set(group, [p]);
    }
    for (const list of groups.values()) {
      for (let i = 0; i < list.length; i += this.#options.maxItems) {
        const chunk = list.slice(i, i + this.#options.maxItems);
        const lane = this.#lane(this.#options.laneOf(chunk[0]!.key));
        const gate = chunk.every((p) => p.background) ? lane.backgroundGate : lane.gate;
        void gate(() => this.#send(lane, chunk));
      }
    }
  }

  /**
   * Waiting calls first, background calls behind them; but a background call for the key of a
   * waiting call keeps its place among that key's calls (a refund made before a consume runs first).
   */
  #queued(): Pending[] {
    if (this.#background.length === 0) return this.#foreground;
    const waiting = new Set(this.#foreground.map((p) => p.key));
    const sameKey = this.#background.filter((p) => waiting.has(p.key));
    if (sameKey.length === 0) return [...this.#foreground, ...this.#background];
    const rest = this.#background.filter((p) => !waiting.has(p.key));
    return [...[...sameKey, ...this.#foreground].sort(byMade), ...rest];
  }

  async #send(lane: Lane, chunk: Pending[]): Promise<void> {
    // Waited for a batch slot past its deadline: the item already failed as never sent.
    const live = chunk.filter((p) => !p.done);
    if (live.length === 0) return;
    const flight = this.#written(lane, live);
    try {
      const replies = await this.#options.send(live).finally(() => this.#answered(flight));
      live.forEach((p, i) => {
        const r = replies[i];
        if (r?.ok) p.settle(undefined, r.reply);
        else p.settle(r ? r.error : new Error('missing reply in batch'));
      });
    } catch (err) {
      for (const p of live) p.settle(err);
    } finally {
      for (const p of live) this.#release(p);
      this.#schedule();
    }
  }

  #lane(id: string): Lane {
    let lane = this.#lanes.get(id);
    if (!lane) {
      lane = new Lane(this.#options.maxInFlight);
      this.#lanes.set(id, lane);
    }
    return lane;
  }

  #written(lane: Lane, live: readonly Pending[]): Flight {
    for (const p of live) p.written();
    this.batches++;
    const flight = new Flight(lane, live, performance.now());
    this.#watch(flight, this.#options.timeoutMs);
    return flight;
  }

  #answered(flight: Flight): void {
    flight.answered = true;
    clearTimeout(flight.timer);
    flight.lane.heardAt = performance.now();
    flight.lane.late = false;
  }

  #watch(flight: Flight, ms: number): void {
    flight.timer = deadline(ms, () => this.#look(flight));
  }

  /**
   * The batch's time is up once its connection has answered nothing for `timeoutMs`, twice looked
   * at with a poll phase between. Time alone says little in a busy turn: the turn that fails a
   * backlog of queued calls into their fail policies can itself outlast `timeoutMs` with replies
   * waiting unread in the socket; what the connection said by the next poll phase is what counts.
   */
  #look(flight: Flight): void {
    if (flight.answered) return;
    const { lane } = flight;
    const { timeoutMs } = this.#options;
    const now = performance.now();
    if (flight.quietAt !== undefined && lane.heardAt <= flight.quietAt) {
      lane.late = true;
      for (const p of flight.items) if (!p.done && !p.hard) this.#timedOut(p);
      return;
    }
    const quietMs = now - Math.max(flight.writtenAt, lane.heardAt);
    if (quietMs < timeoutMs) {
      flight.quietAt = undefined;
      this.#watch(flight, timeoutMs - quietMs);
      return;
    }
    flight.quietAt = now;
    setImmediate(() => this.#look(flight));
  }

  /** A sent call fails unanswered: it may still run, so its key takes no new call until it is answered. */
  #timedOut(p: Pending): void {
    this.#stuck.add(p.key);
    p.settle(new StoreTimeoutError(p.timeoutMs));
  }

  /** The call no longer holds its key; once none does, the key takes calls again. */
  #release(p: Pending): void {
    if (!p.claimed) return;
    p.claimed = false;
    const left = (this.#claimed.get(p.key) ?? 1) - 1;
    if (left > 0) {
      this.#claimed.set(p.key, left);
      return;
    }
    this.#claimed.delete(p.key);
    this.#stuck.delete(p.key);
  }

  readonly #expireOne = (p: Pending) => this.#expire(p);

  #expire(p: Pending): void {
    if (p.done) return;
    const { timeoutMs } = p;
    if (p.sent) {
      // Written between its timer and this check: its batch's watch decides now.
      if (p.hard) this.#timedOut(p);
      return;
    }
    // Claimed but still waiting for a batch slot: it will never be sent, so its key is free.
    this.#release(p);
    if (this.#options.canSend() && !this.#lanes.get(this.#options.laneOf(p.key))?.late) {
      p.settle(
        new StoreOverloadError(
          `Store call not sent within ${timeoutMs} ms: the store was answering, but the calls queued ahead of it took the time`,
        ),
      );
      return;
    }
    p.settle(
      new StoreUnavailableError(
        `Store call not sent within ${timeoutMs} ms (connection not ready or not answering)`,
      ),
    );
  }
}

const byMade = (a: Pending, b: Pending) => a.made - b.made;
