/** The error of class `type` that `run` throws; fails the test when it throws anything else or nothing. */
export function thrown<E extends Error>(type: abstract new (...args: never[]) => E, run: () => unknown): E {
  try {
    run();
  } catch (err) {
    if (err instanceof type) return err;
    throw err;
  }
  throw new Error(`accepted: expected a ${type.name}`);
}
