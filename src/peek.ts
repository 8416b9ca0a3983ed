/**
 * `Limiter.peek` without local state: each algorithm's read-only store operation, and the decision
 * a request of cost 1 would get from what it reads.
 */
import type { Estimate } from './algorithms/estimate.js';
import type { Decision } from './decision.js';
import { retryAfter } from './engines/engine.js';
import type { Rule } from './policy.js';
import { leakyBucketPeek } from './stores/leakyBucketOps.js';
import { quantisedLogPeek, slidingLogPeek } from './stores/slidingLogOps.js';
import type { Operation } from './stores/store.js';
import { tokenBucketPeek } from './stores/tokenBucketOps.js';
import { fixedWindowPeek, slidingWindowPeek } from './stores/windowOps.js';

/** A rule's read: the operation and its request (the rule itself carries every field it needs). */
export interface Read {
  readonly op: Operation<unknown, unknown, Estimate>;
  readonly req: unknown;
  /** The policy's limit, as its decisions carry it. */
  readonly limit: number;
}

const as = <S, Req>(op: Operation<S, Req, Estimate>) =>
  op as unknown as Operation<unknown, unknown, Estimate>;

/** The read of `rule`; undefined for algorithms without a consume (concurrency slots). */
export function readOf(rule: Rule): Read | undefined {
  switch (rule.algorithm) {
    case 'token-bucket':
      return { op: as(tokenBucketPeek), req: rule, limit: rule.burst };
    case 'fixed-window':
      return { op: as(fixedWindowPeek), req: rule, limit: rule.limit };
    case 'sliding-window':
      return { op: as(slidingWindowPeek), req: rule, limit: rule.limit };
    case 'sliding-log':
      return {
        op: rule.quantumMs > 0 ? as(quantisedLogPeek) : as(slidingLogPeek),
        req: rule,
        limit: rule.limit,
      };
    case 'leaky-bucket':
      return { op: as(leakyBucketPeek), req: rule, limit: rule.burst };
    case 'concurrency':
      return undefined;
  }
}

/** The decision a cost-1 consume would see, from a read: `remaining` is what is left before it. */
export function estimated(rule: Rule, key: string, limit: number, e: Estimate): Decision {
  // A limit below one unit never admits a cost of 1.
  const allowed = e.retryMs === 0 && limit >= 1;
  const never = limit < 1;
  return {
    allowed,
    policy: rule.name,
    key,
    limit,
    remaining: Math.max(0, Math.min(limit, Math.floor(e.remaining))),
    resetMs: Math.max(0, Math.ceil(e.resetMs)),
    retryAfterMs: allowed ? 0 : never ? Number.POSITIVE_INFINITY : retryAfter(e.retryMs),
  };
}
