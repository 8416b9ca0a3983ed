import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { expect, it } from 'vitest';

const root = join(import.meta.dirname, '../..');
const { version } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string };
const run = promisify(execFile);

// `npx tokenlease --version`, the first thing many users type, was "unknown command" (exit 2).
it.each([
  ['the built bin (dist/sim/bin.js, what npx runs)', process.execPath, [join(root, 'dist/sim/bin.js')]],
  ['the source (sim/bin.ts)', join(root, 'node_modules/.bin/tsx'), [join(root, 'sim/bin.ts')]],
])('%s prints the package version for --version and -v', async (_, command, args) => {
  for (const flag of ['--version', '-v']) {
    const { stdout } = await run(command, [...args, flag]);
    expect(stdout).toBe(`${version}\n`);
  }
});
