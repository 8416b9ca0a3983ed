/**
 * node:test's `test`, `t.plan`, `t.assert`, `t.after` and `mock.timers`, on vitest, so the
 * @fastify/rate-limit tests run with their assertions unchanged. `t.plan(n)` is checked: the
 * test fails unless exactly `n` assertions ran, as under node:test.
 */
import assert from 'node:assert/strict';
import { afterEach, describe, it, vi } from 'vitest';
import { notApplicable } from '../notApplicable.js';

export { describe };

interface TestContext {
  plan(n: number): void;
  assert: typeof assert;
  after(fn: () => unknown): void;
}

type Body = (t: TestContext) => unknown;

export function test(name: string, options: Body | { skip?: boolean }, body?: Body): void {
  const fn = typeof options === 'function' ? options : body!;
  if (typeof options === 'object' && options.skip) {
    notApplicable(name, 'skipped upstream');
    return;
  }
  it(name, nodeBody(fn));
}

/** A node:test body as a vitest body: plans checked, `t.after` cleanups run. */
export function nodeBody(fn: Body): () => Promise<void> {
  return async () => {
    let planned: number | undefined;
    let count = 0;
    const cleanups: (() => unknown)[] = [];
    const counted = new Proxy(assert, {
      get(target, prop, receiver) {
        const value = Reflect.get(target, prop, receiver);
        if (typeof value !== 'function') return value;
        return (...args: unknown[]) => {
          count++;
          return (value as (...a: unknown[]) => unknown).apply(target, args);
        };
      },
    });
    const t: TestContext = {
      plan: (n) => {
        planned = n;
      },
      assert: counted,
      after: (cleanup) => {
        cleanups.push(cleanup);
      },
    };
    try {
      await fn(t);
      if (planned !== undefined) assert.equal(count, planned, `planned ${planned} assertions, ran ${count}`);
    } finally {
      for (const cleanup of cleanups) await cleanup();
    }
  };
}

/** node:test's mock.timers: `enable(now)` fakes timers and Date from `now`. */
export const mock = {
  timers: {
    enable(now: number | { now?: number } = 0) {
      vi.useFakeTimers({ now: typeof now === 'number' ? now : (now.now ?? 0) });
    },
    tick(ms: number) {
      vi.advanceTimersByTime(ms);
    },
    reset() {
      vi.useRealTimers();
    },
  },
};

afterEach(() => {
  vi.useRealTimers();
});
