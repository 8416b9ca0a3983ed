/**
 * What the windowed counters (fixed window, sliding window) have in common: a lease is a slice of
 * one window's quota, and unused tokens go back to that same window only, so a slice can never
 * move quota from one window into the next. Far from the limit, `sync` grants an allowance instead
 * (write-behind, see `src/algorithms/allowance.ts`): tokens admitted without being counted until
 * they are reported, in the window they were granted for.
 */

export interface WindowAcquireRequest {
  /** Most tokens per window. */
  readonly limit: number;
  /** Window length in ms; `MONTH` (0) for calendar months in UTC (fixed window only). */
  readonly windowMs: number;
  /** Tokens wanted for the slice. */
  readonly want: number;
  /** Fewest tokens worth granting (the cost that is waiting); below it nothing is granted. */
  readonly min: number;
  /**
   * Sliding window only: also grant tokens that open later in this window, as the previous
   * window's weight decays (they become usable at `opensPerMs`, see `src/lease.ts`). A fixed
   * window opens nothing before it ends and ignores this.
   */
  readonly ahead: boolean;
  /**
   * Fixed window only: a window opens at the first grant after the previous one ended (as
   * express-rate-limit and @fastify/rate-limit count) instead of on the epoch grid. Its index is
   * then its start over its length (fractional), so every function of an index keeps working.
   * Ignored for calendar months.
   * @default false
   */
  readonly firstHit?: boolean;
}

export interface WindowGrant {
  readonly granted: number;
  /** Room right after this call: tokens grantable now (negative while tokens leased ahead open). */
  readonly remaining: number;
  /** Tokens per ms that open in this window as the previous window's weight decays (fixed: 0). */
  readonly opensPerMs: number;
  /** Index of the window the tokens belong to: a return names it. */
  readonly window: number;
  /** Ms from the store's decision until that window ends (the slice is worthless after). */
  readonly msLeft: number;
  /** 0 when granted; otherwise ms until `min` tokens could be granted if nothing else changes. */
  readonly retryMs: number;
  /** Ms until the counter is back to zero if nothing else is taken. */
  readonly resetMs: number;
}

/** A read of a window's state (`Limiter.peek`): what a request of cost 1 would see. */
export type WindowPeekRequest = Pick<WindowAcquireRequest, 'limit' | 'windowMs' | 'firstHit'>;

export interface WindowReleaseRequest {
  readonly windowMs: number;
  /** The window the tokens were granted in (`WindowGrant.window`). */
  readonly window: number;
  readonly tokens: number;
}

export interface WindowSyncRequest extends WindowAcquireRequest {
  /** Tokens the instance admitted under its allowance since its last sync: counted now. */
  readonly used: number;
  /** Leased tokens handed back unused: taken off the count now (never below 0). */
  readonly returned: number;
  /**
   * Index of the window `used` and `returned` belong to (`WindowGrant.window` of the allowance or
   * slice); ignored when both are 0. A window the state no longer counts ignores them.
   */
  readonly window: number;
  /** Most allowance wanted (0: none, e.g. a plain report). */
  readonly allowance: number;
  /** Instances sharing the limits (0: unknown, then no allowance is granted). */
  readonly fleet: number;
}

export interface WindowSyncResult extends WindowGrant {
  /**
   * Tokens the instance may admit on its own, valid only in the result's `window` and only until
   * it ends (`msLeft`); nothing is counted for them until they are reported as `used`. When it is
   * above 0, `granted` is 0.
   */
  readonly allowance: number;
}

/**
 * A sync's result: `grant` (a fresh object, which this completes) with its allowance. Not a spread
 * of the grant: see `decisionWith` in src/decision.ts.
 */
export function withAllowance(grant: WindowGrant, allowance: number): WindowSyncResult {
  return Object.assign(grant, { allowance });
}

/**
 * The `min` of the lease `sync` asks for when it grants no allowance: as `acquire`'s, except that 0
 * (a plain report asks for no lease) means nothing short of the whole `want`.
 */
export function leaseMin(req: Pick<WindowSyncRequest, 'want' | 'min'>): number {
  return req.min > 0 ? req.min : req.want;
}

/** A count after a report (returned tokens off, never below 0; used ones on), or undefined if it stays. */
export function settled(
  count: number,
  req: Pick<WindowSyncRequest, 'used' | 'returned'>,
): number | undefined {
  if (req.used > 0 || (req.returned > 0 && count > 0)) return Math.max(0, count - req.returned) + req.used;
  return undefined;
}

/** Slice size for a grant of `min` (the cost) up to `want`, from `room` tokens left. */
export function grantFrom(room: number, want: number, min: number): number {
  if (room >= want) return want;
  if (room >= min) return room;
  return 0;
}
