import { execFileSync } from 'node:child_process';
import { once } from 'node:events';
import { createWriteStream, existsSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * The simulator replaying a long request log (`tokenlease sim --traffic`): wall time and peak RSS
 * at 1 M and 10 M lines, from the built package (npm run build first). Memory must not grow with
 * the log's length: the two peaks should be about equal.
 *
 *   npx tsx bench/sim-replay.ts            # 1e6 and 1e7 lines
 *   npx tsx bench/sim-replay.ts 2000000    # other lengths
 */
const root = join(import.meta.dirname, '..');
const lengths = process.argv.slice(2).map(Number);
const KEYS = 10_000;

/** JSON lines at 2000 req/s over 10k keys with Zipf(1) popularity, written as a stream. */
async function writeLog(path: string, lines: number): Promise<void> {
  if (existsSync(path)) return;
  const out = createWriteStream(path);
  const cumulative = new Float64Array(KEYS);
  let sum = 0;
  for (let i = 0; i < KEYS; i++) cumulative[i] = sum += 1 / (i + 1);
  let seed = 42;
  const random = () => {
    seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
    return seed / 2_147_483_648;
  };
  let t = 1_700_000_000_000;
  for (let i = 0; i < lines; i++) {
    t += 0.5;
    const x = random() * sum;
    let lo = 0;
    let hi = KEYS - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (cumulative[mid]! > x) hi = mid;
      else lo = mid + 1;
    }
    if (!out.write(`{"ts":${t},"key":"k${lo}","gateway":"gw-${i % 8}"}\n`)) await once(out, 'drain');
  }
  out.end();
  await once(out, 'finish');
}

for (const lines of lengths.length > 0 ? lengths : [1_000_000, 10_000_000]) {
  const log = join(tmpdir(), `tokenlease-sim-${lines}.jsonl`);
  await writeLog(log, lines);
  // A fresh process per run, so its peak RSS is the replay's alone.
  const script = `
    const { run } = await import(${JSON.stringify(join(root, 'dist/sim/main.js'))});
    const started = performance.now();
    const code = await run(['--policy', 'per-second', '--traffic', ${JSON.stringify(log)}, '--fields', 'instance=gateway', '--json'],
      { stdout: { write: () => true }, stderr: process.stderr });
    console.log(JSON.stringify({ code, seconds: (performance.now() - started) / 1000, peakRssMB: process.resourceUsage().maxRSS / 1024 }));`;
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
  const r = JSON.parse(out.trim().split('\n').pop()!) as { code: number; seconds: number; peakRssMB: number };
  const size = statSync(log).size / 1e6;
  process.stdout.write(
    `${lines.toLocaleString('en')} lines (${size.toFixed(0)} MB, ${KEYS} keys, 8 instances): ${r.seconds.toFixed(1)} s, ` +
      `${Math.round(lines / r.seconds).toLocaleString('en')} lines/s, peak RSS ${r.peakRssMB.toFixed(0)} MB, exit ${r.code}\n`,
  );
}
