/**
 * What the lease core (`leasedKey.ts`, on `leaseHolder.ts`) asks of a leased algorithm. The core
 * owns the state machine every leased algorithm shares: single-flight store calls, demand and
 * slow-start sizing, refill ahead, write-behind allowances and their reports, expiry and
 * hand-back, refunds, the denial memory and `Decision` assembly. A strategy only knows its
 * algorithm: how a request to the store is shaped, what a reply means as spendable tokens, and how
 * remaining and reset are estimated between replies. The strategy is the key state's own class (a
 * subclass of `LeasedKey`), holding what the store last said about the key: one object per key.
 */
import type { Operation } from '../stores/store.js';

/** A store call the strategy shapes: its operation and request. */
export interface StoreRequest<Res> {
  // biome-ignore lint/suspicious/noExplicitAny: the state and request types stay the strategy's own.
  readonly op: Operation<any, any, Res>;
  readonly req: unknown;
}

/** What the core wants from one sync with the store. */
export interface SyncParams {
  /** Tokens admitted under allowances since the last sync: the store counts them now. */
  readonly used: number;
  /** Leased tokens handed back unused. */
  readonly returned: number;
  /** Leased tokens spent since the last sync: the store stops counting them as possibly coming back. */
  readonly spent: number;
  /** What `used` and `returned` belong to (`Grant.window`). */
  readonly window: number;
  /** Tokens wanted as a lease (0: none, a report only). */
  readonly want: number;
  /** Fewest tokens worth granting: the cost that is waiting (0 with `want` 0). */
  readonly min: number;
  /**
   * One decision for exactly its cost (`lease: 'exact'`, or a cost no lease covers): nothing reaches
   * ahead into tokens that exist only later, and no allowance.
   */
  readonly exact: boolean;
  /**
   * Whether the lease may take tokens that exist only later: only a lease sized beyond the waiting
   * request (an instance expecting more requests), never an exact one. A token that exists only
   * later is too late for the request at hand, and reserved for a quiet instance it would sit idle
   * while others are refused.
   */
  readonly reachAhead: boolean;
  /** Whether an allowance may be granted instead of a lease. */
  readonly allowance: boolean;
  /** Instances sharing the limits (0: unknown). */
  readonly fleet: number;
  /** Local time the call is sent. */
  readonly sentAt: number;
}

/** A store reply in the core's terms. */
export interface Grant {
  /** Tokens leased. */
  readonly granted: number;
  /** Tokens the instance may admit on its own until its next sync (0: none). */
  readonly allowance: number;
  /** Where the leased tokens start in the queue of tokens that exist (`src/lease.ts`). */
  readonly levelBefore: number;
  /** Tokens per ms that come to exist while the level is below zero. */
  readonly opensPerMs: number;
  /** What the tokens belong to: a hand-back or report names it (a window's index; 0 for a bucket). */
  readonly window: number;
  /** Local time after which the tokens and the allowance are worthless (Infinity: never). */
  readonly endsAt: number;
  /** Refused: local time at which the store said `min` tokens fit. */
  readonly retryAt: number;
}

export interface LeaseStrategy<Res> {
  /** Most tokens one request may cost: larger costs are refused outright. */
  readonly limit: number;
  /** Larger costs are decided by the store, with whatever is held handed back first. */
  readonly maxLease: number;
  /** Whether the store may grant allowances (write-behind) for this rule. */
  readonly writeBehind: boolean;
  /**
   * Whether, with write-behind, a key's first request on an instance may be admitted before the
   * store answers: its usage must then be reportable without knowing what the store would say.
   */
  readonly firstSight: boolean;
  /**
   * Whether tokens held when their window ends are still worth handing back (a sliding window
   * weighs the previous window); otherwise they simply die with it.
   */
  readonly carriesOver: boolean;
  /** The call that settles usage and hand-backs and asks for a lease or an allowance. */
  sync(p: SyncParams): StoreRequest<Res>;
  /** Reads a reply of `sync(p)`, received at local time `now`, and remembers what it says. */
  learn(result: Res, p: SyncParams, now: number): Grant;
  /** Gives back `tokens` an admission took, to the store. */
  release(window: number, tokens: number): StoreRequest<unknown>;
  /**
   * Most tokens worth leasing now beyond the request at hand, whatever the demand (e.g. a share of
   * what is left); below 1, every decision goes to the store.
   */
  cap(now: number): number;
  /**
   * Whether the next lease is worth fetching now though more than a quarter of the last one is
   * still held (the core refills ahead at a quarter left); `cap` then sizes it.
   */
  refillsEarly(now: number): boolean;
  /** How far ahead this instance's demand is counted when sizing a lease. */
  horizon(now: number): number;
  /** Tokens left in the shared state as the store last said, carried forward to `now`. */
  remaining(now: number): number;
  /** `resetMs` of a decision that leaves `remaining`. */
  resetMs(now: number, remaining: number): number;
  /** What a refund with nothing held goes to. */
  refundWindow(now: number): number;
  /** `retryAfterMs` for a request whose acquisitions peers kept taking. */
  contentionRetryMs(cost: number): number;
}
