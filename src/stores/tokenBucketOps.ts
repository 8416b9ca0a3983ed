import type { Estimate } from '../algorithms/estimate.js';
import {
  type AcquireRequest,
  type AcquireResult,
  acquire,
  type DebitRequest,
  debit,
  peek,
  type ReleaseRequest,
  release,
  type SyncRequest,
  type SyncResult,
  sync,
  type TokenBucketShape,
  type TokenBucketState,
} from '../algorithms/tokenBucket.js';
import { StoreError } from '../errors.js';
import { parseEstimate, replyArray, replyNumber } from './reply.js';
import type { Operation } from './store.js';

/** A bucket's numbers are always finite: an infinite one means a corrupt reply, not a value. */
function num(value: unknown, what: string, script: string): number {
  const n = replyNumber(value, what, script);
  if (!Number.isFinite(n)) throw new StoreError(`Unexpected ${what} in ${script} reply: ${String(value)}`);
  return n;
}

export const tokenBucketAcquire: Operation<TokenBucketState, AcquireRequest, AcquireResult> = {
  script: 'token_bucket_acquire',
  apply: acquire,
  args: (r) => [r.rate, r.periodMs, r.burst, r.want, r.min, r.ahead],
  parse(reply) {
    const s = 'token_bucket_acquire';
    const r = replyArray(reply, 5, s);
    return {
      granted: num(r[0], 'granted', s),
      levelBefore: num(r[1], 'level', s),
      now: num(r[2], 'now', s),
      // Fields of the literal, not an object spread into it: a copy per exact decision.
      lent: num(r[3], 'lent', s),
      lentMs: num(r[4], 'lentMs', s),
    };
  },
};

export const tokenBucketRelease: Operation<TokenBucketState, ReleaseRequest, null> = {
  script: 'token_bucket_release',
  apply: release,
  args: (r) => [r.rate, r.periodMs, r.burst, r.tokens],
  parse: () => null,
};

export const tokenBucketDebit: Operation<TokenBucketState, DebitRequest, number> = {
  script: 'token_bucket_debit',
  apply: debit,
  args: (r) => [r.rate, r.periodMs, r.burst, r.tokens],
  parse: (reply) => num(reply, 'debited tokens', 'token_bucket_debit'),
};

export const tokenBucketSync: Operation<TokenBucketState, SyncRequest, SyncResult> = {
  script: 'token_bucket_sync',
  apply: sync,
  args: (r) => [
    r.rate,
    r.periodMs,
    r.burst,
    r.used,
    r.returned,
    r.want,
    r.min,
    r.ahead,
    r.allowance,
    r.fleet,
    r.holdMs,
    r.spent,
  ],
  parse(reply) {
    const s = 'token_bucket_sync';
    const r = replyArray(reply, 6, s);
    return {
      granted: num(r[0], 'granted', s),
      allowance: num(r[1], 'allowance', s),
      levelBefore: num(r[2], 'level', s),
      now: num(r[3], 'now', s),
      lent: num(r[4], 'lent', s),
      lentMs: num(r[5], 'lentMs', s),
    };
  },
};

/** Reads what a request of cost 1 would see (`Limiter.peek`); writes nothing. */
export const tokenBucketPeek: Operation<TokenBucketState, TokenBucketShape, Estimate> = {
  script: 'token_bucket_peek',
  apply: peek,
  args: (r) => [r.rate, r.periodMs, r.burst],
  parse: parseEstimate('token_bucket_peek'),
};
