import type { Estimate } from '../algorithms/estimate.js';
import { StoreError } from '../errors.js';

/** Reads a script reply as a fixed-length array, naming the script when it is not one. */
export function replyArray(reply: unknown, length: number, script: string): unknown[] {
  if (!Array.isArray(reply) || reply.length !== length) {
    throw new StoreError(`Unexpected ${script} reply: ${JSON.stringify(reply)}`);
  }
  return reply;
}

/** Reads one number of a reply; scripts send doubles as strings (`fmt`) so nothing is truncated. */
export function replyNumber(value: unknown, what: string, script: string): number {
  const n = typeof value === 'string' || typeof value === 'number' ? Number(value) : Number.NaN;
  if (Number.isNaN(n)) throw new StoreError(`Unexpected ${what} in ${script} reply: ${String(value)}`);
  return n;
}

/** Reads the reply of a read-only `*_peek` script: `{ remaining, reset_ms, retry_ms }`. */
export function parseEstimate(script: string): (reply: unknown) => Estimate {
  return (reply) => {
    const r = replyArray(reply, 3, script);
    return {
      remaining: replyNumber(r[0], 'remaining', script),
      resetMs: replyNumber(r[1], 'resetMs', script),
      retryMs: replyNumber(r[2], 'retryMs', script),
    };
  };
}
