import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';

// A mistyped flag or case ends the bench at once with one line saying what was wrong (exit 2),
// before any server starts; it was parseArgs' stack trace (or an uncaught Error for a case).
describe('npm run bench with a mistake in its arguments', () => {
  it.each([
    [['--quikc'], /bench: Unknown option '--quikc'/],
    [['--case', 'nope'], /bench: unknown case nope; known: micro, /],
  ])('%o: exit 2 and one line', (args, message) => {
    const run = spawnSync(process.execPath, ['--import', 'tsx', 'bench/run.ts', ...args], {
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(run.status).toBe(2);
    expect(run.stderr).toMatch(message);
    expect(run.stderr).not.toMatch(/\n\s+at /);
  });
});
