import type { Estimate } from '../algorithms/estimate.js';
import {
  type CancelRequest,
  cancel,
  type LeakyBucketShape,
  type LeakyBucketState,
  peek,
  type ReserveRequest,
  type ReserveResult,
  reserve,
} from '../algorithms/leakyBucket.js';
import { parseEstimate, replyArray, replyNumber } from './reply.js';
import type { Operation } from './store.js';

export const leakyBucketReserve: Operation<LeakyBucketState, ReserveRequest, ReserveResult> = {
  script: 'leaky_bucket_reserve',
  apply: reserve,
  args: (r) => [r.rate, r.periodMs, r.burst, r.cost, r.maxWaitMs],
  parse(reply) {
    const s = 'leaky_bucket_reserve';
    const r = replyArray(reply, 3, s);
    return {
      allowed: replyNumber(r[0], 'allowed', s) === 1,
      delayMs: replyNumber(r[1], 'delayMs', s),
      backlogMs: replyNumber(r[2], 'backlogMs', s),
    };
  },
};

export const leakyBucketCancel: Operation<LeakyBucketState, CancelRequest, null> = {
  script: 'leaky_bucket_cancel',
  apply: cancel,
  args: (r) => [r.rate, r.periodMs, r.cost],
  parse: () => null,
};

/** Reads what a request of cost 1 that may not wait would see (`Limiter.peek`); writes nothing. */
export const leakyBucketPeek: Operation<LeakyBucketState, LeakyBucketShape, Estimate> = {
  script: 'leaky_bucket_peek',
  apply: peek,
  args: (r) => [r.rate, r.periodMs, r.burst],
  parse: parseEstimate('leaky_bucket_peek'),
};
