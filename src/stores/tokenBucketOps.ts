import {
  type AcquireRequest,
  type AcquireResult,
  acquire,
  type DebitRequest,
  debit,
  type ReleaseRequest,
  release,
  type TokenBucketState,
} from '../algorithms/tokenBucket.js';
import { StoreError } from '../errors.js';
import type { Operation } from './store.js';

function num(value: unknown, what: string): number {
  const n = typeof value === 'string' || typeof value === 'number' ? Number(value) : Number.NaN;
  if (!Number.isFinite(n)) throw new StoreError(`Unexpected ${what} in token bucket reply: ${String(value)}`);
  return n;
}

export const tokenBucketAcquire: Operation<TokenBucketState, AcquireRequest, AcquireResult> = {
  script: 'token_bucket_acquire',
  apply: acquire,
  args: (r) => [r.rate, r.periodMs, r.burst, r.want, r.min, r.ahead],
  parse(reply) {
    if (!Array.isArray(reply) || reply.length !== 3) {
      throw new StoreError(`Unexpected token bucket reply: ${JSON.stringify(reply)}`);
    }
    return {
      granted: num(reply[0], 'granted'),
      levelBefore: num(reply[1], 'level'),
      now: num(reply[2], 'now'),
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
  parse: (reply) => num(reply, 'debited tokens'),
};
