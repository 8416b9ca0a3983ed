import type { Estimate } from '../algorithms/estimate.js';
import * as log from '../algorithms/slidingLog.js';
import * as quantised from '../algorithms/slidingLogQuantised.js';
import { parseEstimate, replyArray, replyNumber } from './reply.js';
import type { Operation } from './store.js';

export const slidingLogAcquire: Operation<log.SlidingLogState, log.LogAcquireRequest, log.LogAcquireResult> =
  {
    script: 'sliding_log_acquire',
    apply: log.acquire,
    args: (r) => [r.limit, r.windowMs, r.cost, r.id],
    parse(reply) {
      const s = 'sliding_log_acquire';
      const r = replyArray(reply, 4, s);
      return {
        allowed: replyNumber(r[0], 'allowed', s) === 1,
        count: replyNumber(r[1], 'count', s),
        retryMs: replyNumber(r[2], 'retryMs', s),
        resetMs: replyNumber(r[3], 'resetMs', s),
      };
    },
  };

export const slidingLogRelease: Operation<log.SlidingLogState, log.LogReleaseRequest, null> = {
  script: 'sliding_log_release',
  apply: log.release,
  args: (r) => [r.cost, r.id],
  parse: () => null,
};

export const quantisedLogAcquire: Operation<
  quantised.QuantisedLogState,
  quantised.QuantisedAcquireRequest,
  quantised.QuantisedAcquireResult
> = {
  script: 'sliding_log_quantised_acquire',
  apply: quantised.acquire,
  args: (r) => [r.limit, r.windowMs, r.quantumMs, r.cost],
  parse(reply) {
    const s = 'sliding_log_quantised_acquire';
    const r = replyArray(reply, 5, s);
    return {
      allowed: replyNumber(r[0], 'allowed', s) === 1,
      count: replyNumber(r[1], 'count', s),
      bucket: replyNumber(r[2], 'bucket', s),
      retryMs: replyNumber(r[3], 'retryMs', s),
      resetMs: replyNumber(r[4], 'resetMs', s),
    };
  },
};

export const quantisedLogRelease: Operation<
  quantised.QuantisedLogState,
  quantised.QuantisedReleaseRequest,
  null
> = {
  script: 'sliding_log_quantised_release',
  apply: quantised.release,
  args: (r) => [r.bucket, r.cost],
  parse: () => null,
};

/** Reads what a request of cost 1 would see (`Limiter.peek`); writes nothing. */
export const slidingLogPeek: Operation<log.SlidingLogState, log.LogPeekRequest, Estimate> = {
  script: 'sliding_log_peek',
  apply: log.peek,
  args: (r) => [r.limit, r.windowMs],
  parse: parseEstimate('sliding_log_peek'),
};

/** Reads what a request of cost 1 would see (`Limiter.peek`); writes nothing. */
export const quantisedLogPeek: Operation<
  quantised.QuantisedLogState,
  quantised.QuantisedPeekRequest,
  Estimate
> = {
  script: 'sliding_log_quantised_peek',
  apply: quantised.peek,
  args: (r) => [r.limit, r.windowMs, r.quantumMs],
  parse: parseEstimate('sliding_log_quantised_peek'),
};
