import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, inject, it } from 'vitest';
import { simInProcess } from '../support/sim.js';

/**
 * Every `npm run sim` and `npx tokenlease sim` command in the ```sh blocks of docs/simulator.md
 * runs and exits 0. Three rewrites keep the run self-contained: `--out` goes to a scratch
 * directory, `--redis` to the test Redis, and `node_modules/tokenlease/` (the installed package)
 * is this repository. The installed bin itself is run by test/package/pack.test.ts.
 */
const root = join(import.meta.dirname, '../..');
const out = mkdtempSync(join(tmpdir(), 'sim-docs-'));

/** Shell words of one command line: single and double quotes, no expansions. */
function words(line: string): string[] {
  const out: string[] = [];
  for (const m of line.matchAll(/'([^']*)'|"((?:[^"\\]|\\.)*)"|(\S+)/g)) out.push(m[1] ?? m[2] ?? m[3]!);
  return out;
}

function commands(): { line: string; args: string[] }[] {
  const doc = readFileSync(join(root, 'docs/simulator.md'), 'utf8');
  const found: { line: string; args: string[] }[] = [];
  for (const block of doc.matchAll(/```sh\n([\s\S]*?)```/g)) {
    for (const raw of block[1]!.split('\n')) {
      const line = raw.replace(/\s+#\s.*$/, '').trim();
      const w = words(line);
      let args: string[];
      if (w.slice(0, 3).join(' ') === 'npm run sim') args = w.slice(w[3] === '--' ? 4 : 3);
      else if (w.slice(0, 3).join(' ') === 'npx tokenlease sim') args = w.slice(3);
      else continue;
      found.push({ line, args });
    }
  }
  return found;
}

function rewrite(args: string[]): string[] {
  return args.map((a, i) => {
    if (args[i - 1] === '--out') return join(out, `${i}-${a.replace(/\//g, '_')}`);
    if (args[i - 1] === '--redis') return inject('redisUrl');
    return a.replace(/^node_modules\/tokenlease\//, `${root}/`);
  });
}

describe('docs/simulator.md', () => {
  const all = commands();
  it('shows the three ways to run it: our scenarios, your policy or plans, your traffic', () => {
    expect(
      all.some((c) => c.line === 'npm run sim'),
      'the default suite',
    ).toBe(true);
    expect(
      all.some((c) => c.args.includes('--policy')),
      'a policy',
    ).toBe(true);
    expect(
      all.some((c) => c.args.includes('--plans') && !c.args.includes('--traffic')),
      'plans',
    ).toBe(true);
    expect(
      all.some((c) => c.args.includes('--traffic')),
      'a log',
    ).toBe(true);
    expect(
      all.some((c) => c.line.startsWith('npx tokenlease sim')),
      'the installed package',
    ).toBe(true);
  });

  // The default suite is ~15 s of CPU on its own; on a loaded 2-core machine it needs the room.
  it.each(all.map((c) => [c.line, c.args] as const))(
    '%s exits 0',
    async (_line, args) => {
      const r = await simInProcess(rewrite([...args]));
      expect(r.code, `${r.stdout.slice(-2000)}\n${r.stderr}`).toBe(0);
    },
    300_000,
  );
});
