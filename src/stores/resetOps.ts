import { replyNumber } from './reply.js';
import type { Operation } from './store.js';

/** Forgets a key's shared state, whatever its algorithm (each keeps one key). Result: whether any existed. */
export const resetKey: Operation<unknown, null, boolean> = {
  script: 'reset',
  apply: (state) => ({ state: undefined, ttlMs: 0, result: state !== undefined }),
  args: () => [],
  parse: (reply) => replyNumber(reply, 'deleted', 'reset') > 0,
};
