import { it } from 'vitest';

/** An upstream test that cannot apply to tokenlease, and why. */
export interface NotApplicable {
  name: string;
  reason: string;
}

/**
 * The not-applicable tests of the ported files evaluated so far in this worker. They are data, not
 * skipped tests: a skipped test reads as a hidden failure. test/compat/notApplicable.test.ts
 * evaluates every ported file to fill it and checks docs/migrating.md's counts against it.
 */
export const notApplicableTests: NotApplicable[] = [];

/**
 * An upstream test that cannot apply to tokenlease, kept in the ported file under its own name with
 * the reason, beside the tests it stood between upstream. It declares no test (never counted as
 * passed); the name and reason go to {@link notApplicableTests}.
 */
export function notApplicable(name: string, reason: string): void {
  notApplicableTests.push({ name, reason });
}

/**
 * An upstream test whose assertion tokenlease deliberately does not meet (docs/migrating.md), run
 * with the upstream `body` as an expected failure: should tokenlease's behaviour change so that the
 * body passes, the test fails and the difference gets looked at again.
 */
export function deliberatelyDifferent(name: string, reason: string, body: () => unknown): void {
  it.fails(`${name} [deliberately different: ${reason}]`, body);
}
