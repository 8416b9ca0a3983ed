/** The answer to a `consume`. Being over the limit is a value (`allowed: false`), never an exception. */
export interface Decision {
  allowed: boolean;
  /** The policy decided on (for a multi-rule check: the most restrictive one). */
  policy: string;
  key: string;
  /** The policy's limit (a token bucket's burst). */
  limit: number;
  /** Best local estimate of what is left for this key across the cluster; >= 0. */
  remaining: number;
  /** Milliseconds until the limit is fully replenished. */
  resetMs: number;
  /** 0 when allowed; when denied, ms until the same cost can pass; Infinity when it never can. */
  retryAfterMs: number;
  /**
   * What decided: `'lease'` local state alone (tokens leased earlier, a remembered denial),
   * `'store'` a store call made for this request, `'fallback'` the rule's fail policy because the
   * store failed or is suspended (docs/operations.md). Always set by `Limiter`.
   */
  source?: DecisionSource;
  /** For a multi-rule `consume`: each rule's own decision, in the order of the checks. */
  checks?: readonly Decision[];
}

export type DecisionSource = 'lease' | 'store' | 'fallback';
/** A turn in a leaky bucket's drain (`Limiter.reserve`). */
export interface Reservation extends Decision {
  /** Ms to wait before proceeding (0 when it may go now, or when refused). */
  delayMs: number;
  /** Gives the turn back so the next request takes it; a no-op when refused or already cancelled. */
  cancel(): Promise<void>;
}

/** Concurrency slots held until released (`Limiter.acquire`). */
export interface SlotHandle extends Decision {
  /** Frees the slots (a no-op when refused); idempotent, never rejects. */
  release(): Promise<void>;
}

/** One rule of a multi-rule `consume`. */
export interface Check {
  policy: string;
  key: string;
  /** @default 1 */
  cost?: number;
  /**
   * The route the request is for (e.g. `GET /v1/search`); only carried into events and logs.
   * @default undefined
   */
  route?: string;
  /**
   * A dry-run rule, decided and counted as usual, that the caller will not enforce: observers hear
   * a refusal as `shadow-denied` rather than `denied`.
   * @default false
   */
  shadow?: boolean;
}

/** What a policy allows, for response headers (`Limiter.describe`). */
export interface PolicyDescription {
  limit: number;
  /** Seconds to restore the whole limit from empty (at least 1): the policy's window. */
  windowSeconds: number;
}

/**
 * A copy of `decision` with `checks`, built from a literal (fields listed, not spread): on Node 20
 * an object spread and then given properties it did not have gets a hidden class of its own every
 * time, which costs microseconds per call (and GC) on a path taken per request. With checks, one
 * literal of nine fields: adding `checks` afterwards cost a map transition and a property store
 * outside the object on every multi-rule answer.
 */
export function withChecks(decision: Decision, checks: readonly Decision[] | undefined): Decision {
  const { allowed, policy, key, limit, remaining, resetMs, retryAfterMs, source } = decision;
  if (checks === undefined) return { allowed, policy, key, limit, remaining, resetMs, retryAfterMs, source };
  return { allowed, policy, key, limit, remaining, resetMs, retryAfterMs, source, checks };
}

/** `decision` with `extra` fields added, as `{ ...decision, ...extra }` would give (see `withChecks`). */
export function decisionWith<E extends object>(decision: Decision, extra: E): Decision & E {
  return Object.assign(withChecks(decision, decision.checks), extra);
}
