// The not-applicable upstream tests are data (./notApplicable.ts), not skipped tests. This file
// evaluates every ported file with vitest's `describe`/`it` replaced by recorders, so it sees, per
// file, the tests the file declares and the not-applicable ones it registers: each test file runs
// in its own worker, so a registry filled there is not visible here.
import { readdirSync, readFileSync } from 'node:fs';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import type { NotApplicable } from './notApplicable.js';

interface PortedFile {
  suite: 'express' | 'fastify';
  file: string;
  /** The upstream names of the tests the file runs, deliberately different ones included. */
  tests: string[];
  notApplicable: NotApplicable[];
}

declare module 'vitest' {
  interface TaskMeta {
    /** The registry, for test/compat/counts.mjs to read from the JSON report. */
    notApplicable?: (NotApplicable & Pick<PortedFile, 'suite' | 'file'>)[];
  }
}

async function evaluatePortedFiles(): Promise<PortedFile[]> {
  let tests: string[] = [];
  const declare = (name: string) => {
    tests.push(name);
  };
  const ignore = () => {};
  vi.doMock('vitest', async (importOriginal) => ({
    ...(await importOriginal<typeof import('vitest')>()),
    describe: (_name: string, factory: () => void) => factory(),
    it: Object.assign(declare, {
      fails: (title: string) => declare(title.replace(/ \[deliberately different: .*\]$/s, '')),
    }),
    beforeAll: ignore,
    afterAll: ignore,
    beforeEach: ignore,
    afterEach: ignore,
  }));
  // Imported after the mock, so that the ported files register into this very instance.
  const { notApplicableTests } = await import('./notApplicable.js');
  const files: PortedFile[] = [];
  for (const suite of ['express', 'fastify'] as const) {
    const dir = new URL(`./${suite}/`, import.meta.url);
    // behaviour.test.ts holds tokenlease's own tests, not upstream ones.
    const names = readdirSync(dir).filter((f) => /\.test\.[jt]s$/.test(f) && !f.startsWith('behaviour.'));
    for (const name of names.sort()) {
      tests = [];
      const from = notApplicableTests.length;
      await import(new URL(name, dir).href);
      files.push({ suite, file: `${suite}/${name}`, tests, notApplicable: notApplicableTests.slice(from) });
    }
  }
  vi.doUnmock('vitest');
  return files;
}

/** docs/migrating.md's row for a suite's upstream tests, by column title. */
function docsCounts(suite: PortedFile['suite']): Record<string, number> {
  const lines = readFileSync(new URL('../../docs/migrating.md', import.meta.url), 'utf8').split('\n');
  const cells = (line: string) =>
    line
      .split('|')
      .slice(1, -1)
      .map((cell) => cell.trim());
  const header = lines.find((line) => line.startsWith('| suite (upstream commit) |'));
  const row = lines.find((line) => line.startsWith('| ') && line.includes(`\`test/compat/${suite}\``));
  expect(header, 'docs/migrating.md: the table of upstream suites').toBeDefined();
  expect(row, `docs/migrating.md: the row of test/compat/${suite}`).toBeDefined();
  const titles = cells(header!);
  return Object.fromEntries(cells(row!).map((cell, i) => [titles[i], Number.parseInt(cell, 10)]));
}

describe('the ported upstream suites', () => {
  let files: PortedFile[];
  beforeAll(async () => {
    files = await evaluatePortedFiles();
  });

  it("docs/migrating.md's upstream, applicable and not-applicable counts are the ported files'", ({
    task,
  }) => {
    task.meta.notApplicable = files.flatMap(({ suite, file, notApplicable }) =>
      notApplicable.map((entry) => ({ suite, file, ...entry })),
    );
    for (const suite of ['express', 'fastify'] as const) {
      const ported = files.filter((f) => f.suite === suite);
      const applicable = ported.reduce((n, f) => n + f.tests.length, 0);
      const notApplicable = ported.reduce((n, f) => n + f.notApplicable.length, 0);
      const docs = docsCounts(suite);
      expect(
        {
          'upstream tests': docs['upstream tests'],
          applicable: docs.applicable,
          'not applicable': docs['not applicable'],
        },
        `docs/migrating.md, test/compat/${suite}`,
      ).toEqual({
        'upstream tests': applicable + notApplicable,
        applicable,
        'not applicable': notApplicable,
      });
    }
  });

  it('no not-applicable test carries the name of a test its file runs, or an empty reason', () => {
    const clashes = files.flatMap(({ file, tests, notApplicable }) =>
      notApplicable.filter(({ name }) => tests.includes(name)).map(({ name }) => `${file}: ${name}`),
    );
    expect(clashes, 'registered as not applicable and also run').toEqual([]);
    const unexplained = files.flatMap(({ file, notApplicable }) =>
      notApplicable.filter(({ reason }) => reason.trim() === '').map(({ name }) => `${file}: ${name}`),
    );
    expect(unexplained, 'not applicable without a reason').toEqual([]);
  });
});
