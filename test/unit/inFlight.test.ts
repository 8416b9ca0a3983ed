import { describe, expect, it } from 'vitest';
import { InFlight } from '../../src/inFlight.js';

/** A promise and the functions that settle it. */
function deferred() {
  let resolve!: () => void;
  let reject!: (err: Error) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** Whether `promise` has settled once the microtasks queued so far have run. */
async function settledYet(promise: Promise<unknown>): Promise<boolean> {
  let done = false;
  promise.then(() => {
    done = true;
  });
  await new Promise((resolve) => setImmediate(resolve));
  return done;
}

describe('InFlight: the background work close() waits for', () => {
  it('settles at once with nothing tracked', async () => {
    expect(await settledYet(new InFlight().settled())).toBe(true);
  });

  it('waits for every tracked call, rejected ones and ones tracked while waiting included', async () => {
    const inFlight = new InFlight();
    const a = deferred();
    const b = deferred();
    const c = deferred();
    inFlight.track(a.promise);
    inFlight.track(b.promise);
    const settled = inFlight.settled();
    a.resolve();
    expect(await settledYet(settled), 'one of two still in flight').toBe(false);
    // A hand-back started by a call that settled (close() disposing states while others finish).
    inFlight.track(c.promise);
    b.reject(new Error('store down'));
    expect(await settledYet(settled), 'the one tracked while waiting is still in flight').toBe(false);
    c.resolve();
    expect(await settledYet(settled), 'all settled, one of them rejected').toBe(true);
    expect(await settledYet(inFlight.settled()), 'nothing left').toBe(true);
  });
});
