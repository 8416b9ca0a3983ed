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
