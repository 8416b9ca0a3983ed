import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { run } from './main.js';

/**
 * `npm run sim:screenshot`: regenerates docs/sim-report.png, the top of the default suite's HTML
 * report (summary table, legend, first scenario's charts), with headless Chromium
 * (Debian: `apt-get install -y chromium`; another binary: CHROMIUM=/path/to/chrome).
 */
const root = join(import.meta.dirname, '..');
// The report a user gets from `npm run sim -- --out sim/out/report.html` (sim/out is git-ignored).
const html = join(root, 'sim/out/report.html');
const png = join(root, 'docs/sim-report.png');
{
  const code = await run(['--out', 'sim/out/report.html'], {
    stdout: { write: () => true },
    stderr: process.stderr,
  });
  if (code === 2) throw new Error('the simulator refused its options');
  execFileSync(
    process.env.CHROMIUM ?? 'chromium',
    [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--no-first-run',
      '--hide-scrollbars',
      '--window-size=1360,1700',
      `--screenshot=${png}`,
      `file://${html}`,
    ],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
  process.stdout.write(`wrote ${png}\n`);
}
