/**
 * How an algorithm plugs into the `Limiter`: an engine opens a `KeyState` per (policy, key), which
 * decides from local lease state and goes to the store through the `EngineContext`. The limiter
 * owns what is common — policy lookup, argument checks, the LRU of key states, multi-rule
 * all-or-nothing with refunds, stats, `sweep()` and `close()` — and never looks inside a KeyState.
 */
import type { LimitFunction } from 'p-limit';
import type { Check, Decision, PolicyDescription, Reservation, SlotHandle } from '../decision.js';
import { StoreUnavailableError } from '../errors.js';
import type { LimiterStats, ReturnReason } from '../observe/events.js';
import type { Telemetry } from '../observe/telemetry.js';
import type { Rule } from '../policy.js';
import type { Operation, RunOptions, Store } from '../stores/store.js';

/** Options of a store call nobody waits for. */
export const BACKGROUND: RunOptions = { background: true };

/** The counters of `Limiter.stats()` that engines keep up to date. */
export type Counters = Pick<
  LimiterStats,
  | 'storeCalls'
  | 'storeErrors'
  | 'leasesGranted'
  | 'tokensLeased'
  | 'tokensReturned'
  | 'tokensAllowed'
  | 'tokensReported'
  | 'localDecisions'
  | 'decisions'
>;

/** What the limiter lends its engines. */
export interface EngineContext {
  readonly store: Store;
  /**
   * Bounds the background store calls in flight (refills ahead, hand-backs): calls a request waits
   * for never queue behind them.
   */
  readonly gate: LimitFunction;
  readonly now: () => number;
  readonly stats: Counters;
  /** An id no other call of any limiter uses: names what a call writes into shared state (log entries, slots). */
  nextId(): string;
  /** Makes `close()` wait for a background store call. */
  track(promise: Promise<unknown>): void;
  /** The key state the limiter currently holds under `storageKey`, if any. */
  peek(storageKey: string): KeyState | undefined;
  /**
   * Keeps a state swept even after the LRU evicted it, while it holds something that needs upkeep
   * (concurrency slots in use must be renewed). `unpin` when it holds nothing more.
   */
  pin(state: KeyState): void;
  unpin(state: KeyState): void;
  /**
   * Instances sharing the limits as the store last counted them (at least `expectedInstances`),
   * or 0 before the first count: then nothing is decided under an allowance.
   */
  fleet(): number;
  /** True once `close()` was called. */
  readonly closed: boolean;
  /**
   * Whether store calls for `storageKey` are suspended by the circuit breaker (or one is probing).
   * An engine should then not make a request wait for its store call: rejecting with
   * `StoreUnavailableError` lets the rule's fail policy answer at once.
   */
  suspended(storageKey: string): boolean;
  /** Lease events for observers. */
  readonly telemetry: Pick<Telemetry, 'leaseGranted' | 'leaseReturned' | 'stranded'>;
  /**
   * Every decision passes through here on its way out: counted as local when it waited for no
   * store call (`storeWaits` 0), and reported to observers. Returns `decision`.
   */
  answer(storeWaits: number, cost: number, check: Check | undefined, decision: Decision): Decision;
}

/** One check of a `consume`: the decision, and how to give back what an admission took. */
export interface Consumed {
  readonly decision: Decision;
  /**
   * Undoes an allowed decision (a multi-rule check that another rule refused) and returns the
   * decision as it stands after the refund.
   */
  readonly refund?: () => Decision;
}

/** Local state and behaviour of one (policy, key). */
export interface KeyState {
  readonly rule: Rule;
  /** The client key. */
  readonly key: string;
  readonly storageKey: string;
  /** The limiter's bookkeeping: its lookup count when it last refreshed this state's LRU recency. */
  lruTouch?: number;
  /**
   * The limiter's bookkeeping: the state the check after this one looked up in the last multi-rule
   * consume with this state in it, so that the next such consume skips that lookup.
   */
  nextCheck?: KeyState | undefined;
  /** `check`: the caller's check of a multi-rule consume (route, shadow), for observers. */
  consume?(cost: number, check?: Check): Promise<Consumed>;
  /**
   * The same decision without a promise when local state alone can answer; undefined (nothing
   * changed) when the store must answer. Nothing is allocated for a refund: a multi-rule consume
   * reads `reportWindow` right after it and, when another rule refuses, calls `refundLocal`.
   */
  decideLocal?(cost: number, check?: Check): Decision | undefined;
  /** What the tokens a decision takes now belong to (a window's index; 0 for a bucket). */
  readonly reportWindow?: number;
  /**
   * Undoes an allowed `decideLocal` that took `cost` from `window` (its `reportWindow` then), for a
   * multi-rule check another rule refused; returns the decision as it stands after the refund.
   */
  refundLocal?(cost: number, decision: Decision, window: number): Decision;
  /**
   * The decision a cost-1 consume would see now, changing nothing (`Limiter.peek`): `allowed` says
   * whether it would pass, `remaining` is what is left before it. Implemented where local state
   * (a lease, an allowance) knows better than the store, which does not see what this instance
   * holds; undefined when only the store can tell (then the limiter reads the store).
   */
  estimate?(): Decision | undefined;
  /** Shaping algorithms: take a turn up to `maxWaitMs` ahead (`Limiter.reserve`). */
  reserve?(cost: number, maxWaitMs: number | undefined): Promise<Reservation>;
  /** Slot algorithms: hold slots until released (`Limiter.acquire`). */
  acquire?(cost: number): Promise<SlotHandle>;
  /**
   * Gives back `cost` tokens an allowed consume took (`Limiter.refund`): into the local lease when
   * one is held, else to the store. Algorithms without it cannot refund by key.
   */
  refund?(cost: number): Promise<void>;
  /** Hands back whatever is leased (lease expiry, eviction, close). Never throws. */
  returnUnused(reason: ReturnReason): void;
  /**
   * The limiter's: this instance held the key under the rule this state's replaced (`setPolicies`),
   * so it has had its first sight of the key and must not admit another before the store answers.
   */
  forgoFirstSight?(): void;
  /** Periodic upkeep; true when the state holds nothing worth keeping and may be forgotten. */
  sweep(now: number): boolean;
}

/** The `Limiter` methods a policy answers: `consume`, `reserve` (shaping), `acquire` (slots). */
export type Method = 'consume' | 'reserve' | 'acquire';

export interface Engine<R extends Rule> {
  /** Opens the local state of one (policy, key). */
  open(ctx: EngineContext, rule: R, key: string, storageKey: string): KeyState;
  /** The methods its key states implement (`consume` always returns an `Consumed`). */
  readonly methods: readonly Method[];
  /** Limit and window of a rule, for response headers (`Limiter.describe`). */
  describe(rule: R, now: number): PolicyDescription;
}

/** A refunded decision: `cost` more remains (up to the limit); the reset time is the engine's to say. */
export function refunded(decision: Decision, cost: number, resetMs = decision.resetMs): Decision {
  return { ...decision, remaining: Math.min(decision.limit, decision.remaining + cost), resetMs };
}

/** Whole seconds of a duration in ms, at least 1 (`PolicyDescription.windowSeconds`). */
export function seconds(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}

/**
 * One store call, counted in the stats; rejects as the store does. A background call (nobody waits
 * for it) goes through the gate and is marked so the store never sends it ahead of waiting calls.
 */
export function storeCall<S, Req, Res>(
  ctx: EngineContext,
  op: Operation<S, Req, Res>,
  storageKey: string,
  req: Req,
  options: RunOptions = {},
): Promise<Res> {
  ctx.stats.storeCalls++;
  // A closing limiter lifts the gate (its store's batches bound what is in flight): its calls go
  // straight on, without a queue entry each.
  const call =
    options.background && !ctx.closed
      ? ctx.gate(() => ctx.store.run(op, storageKey, req, options))
      : ctx.store.run(op, storageKey, req, options);
  return call.catch((err: unknown) => {
    ctx.stats.storeErrors++;
    throw err;
  });
}

/**
 * Hands leased tokens back in the background: counted, reported to observers, and reported as
 * stranded when the store call fails (the shared state is then short of them until it recovers).
 * Resolves once the call settled; never rejects.
 */
export function handBack<S, Req, Res>(
  ctx: EngineContext,
  op: Operation<S, Req, Res>,
  storageKey: string,
  req: Req,
  returned: {
    policy: string;
    key: string;
    tokens: number;
    reason: ReturnReason;
    /** Called when the call was certainly never sent: what it reported is still to be reported. */
    unsent?: () => void;
  },
): Promise<void> {
  const { policy, key, tokens, reason } = returned;
  ctx.stats.tokensReturned += tokens;
  ctx.telemetry.leaseReturned(policy, key, tokens, reason);
  // Handed back for an oversized cost, the tokens must reach the store before the exact call that
  // follows: that call waits, so this one must not queue behind background work.
  const options = reason === 'oversized' ? {} : BACKGROUND;
  const call = storeCall(ctx, op, storageKey, req, options).then(
    () => {},
    (err: unknown) => {
      if (err instanceof StoreUnavailableError) returned.unsent?.();
      ctx.telemetry.stranded(policy, key, tokens);
    },
  );
  ctx.track(call);
  return call;
}

/** A store call nobody waits for (a refund): tracked for `close()`, errors counted. */
export function backgroundCall<S, Req, Res>(
  ctx: EngineContext,
  op: Operation<S, Req, Res>,
  storageKey: string,
  req: Req,
): void {
  ctx.track(storeCall(ctx, op, storageKey, req, BACKGROUND).catch(() => {}));
}

/** `retryAfterMs` as decisions carry it: whole milliseconds, or Infinity when it never passes. */
export function retryAfter(ms: number): number {
  return ms === Number.POSITIVE_INFINITY ? ms : Math.ceil(Math.max(0, ms));
}

/** A request waiting for a lease gives up after this many acquisitions were taken by its peers. */
export const MAX_ATTEMPTS = 8;
