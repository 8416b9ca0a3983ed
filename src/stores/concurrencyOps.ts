import {
  acquire,
  type ConcurrencyState,
  type ReleaseRequest,
  type RenewRequest,
  release,
  renew,
  type SlotAcquireRequest,
  type SlotAcquireResult,
} from '../algorithms/concurrency.js';
import { StoreError } from '../errors.js';
import { replyArray, replyNumber } from './reply.js';
import type { Operation } from './store.js';

export const concurrencyAcquire: Operation<ConcurrencyState, SlotAcquireRequest, SlotAcquireResult> = {
  script: 'concurrency_acquire',
  apply: acquire,
  args: (r) => [r.limit, r.want, r.min, r.ttlMs, r.owner, r.first],
  parse(reply) {
    const s = 'concurrency_acquire';
    const r = replyArray(reply, 3, s);
    return {
      granted: replyNumber(r[0], 'granted', s),
      held: replyNumber(r[1], 'held', s),
      retryMs: replyNumber(r[2], 'retryMs', s),
    };
  },
};

export const concurrencyRelease: Operation<ConcurrencyState, ReleaseRequest, number> = {
  script: 'concurrency_release',
  apply: release,
  args: (r) => r.ids,
  parse: (reply) => replyNumber(reply, 'held', 'concurrency_release'),
};

export const concurrencyRenew: Operation<ConcurrencyState, RenewRequest, string[]> = {
  script: 'concurrency_renew',
  apply: renew,
  args: (r) => [r.ttlMs, r.limit, ...r.ids],
  parse(reply) {
    if (!Array.isArray(reply) || reply.some((id) => typeof id !== 'string')) {
      throw new StoreError(`Unexpected concurrency_renew reply: ${JSON.stringify(reply)}`);
    }
    return reply as string[];
  },
};
