/**
 * What the windowed counters (fixed window, sliding window) have in common: a lease is a slice of
 * one window's quota, and unused tokens go back to that same window only, so a slice can never
 * move quota from one window into the next.
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

export interface WindowReleaseRequest {
  readonly windowMs: number;
  /** The window the tokens were granted in (`WindowGrant.window`). */
  readonly window: number;
  readonly tokens: number;
}

/** Slice size for a grant of `min` (the cost) up to `want`, from `room` tokens left. */
export function grantFrom(room: number, want: number, min: number): number {
  if (room >= want) return want;
  if (room >= min) return room;
  return 0;
}
