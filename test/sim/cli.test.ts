import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseDuration } from '../../sim/args.js';
import { run } from '../../sim/main.js';
import { SUITE } from '../../sim/suite.js';
import { type CliResult, simInProcess } from '../support/sim.js';

/** `npm run sim -- ...args` as a real process (tsx, as the npm script runs it), without npm's output. */
function spawnSim(args: string[]): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'sim/cli.ts', ...args], {
      cwd: join(import.meta.dirname, '../..'),
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d));
    child.stderr.on('data', (d: Buffer) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

const tiny = {
  name: 'tiny',
  policy: { algorithm: 'token-bucket', rate: 50, burst: 50 },
  durationMs: 1500,
  instances: 4,
  traffic: { demand: { shape: 'steady', load: 3 } },
};

describe('npm run sim', () => {
  it.each([
    [['--bogus'], /^sim: unknown option --bogus\n/],
    [['extra'], /unexpected argument "extra"/],
    [['--scenario', 'nope'], /--scenario: unknown scenario "nope"; known: one-key-6x/],
    [
      ['--instances', 'many'],
      /--instances: expected a whole number from 1 to 1000 or a list like 5,10,20,50, got "many"/,
    ],
    [['--instances', '0'], /^sim: --instances: expected a whole number from 1 to 1000/],
    [['--instances', '-3'], /^sim: --instances: expected a whole number from 1 to 1000 .*got "-3"/],
    [['--duration', '-1'], /^sim: --duration: expected a duration like 30s, 2m or 500ms, got "-1"/],
    [['--max-fraction', '0,2'], /--max-fraction: expected fractions above 0 up to 1/],
    [
      ['--replay', '{}'],
      /scenario #1: Invalid `scenario.name`: expected a name of 1 to 100 characters, got nothing \(the field is missing\)/,
    ],
    [['--traffic', 'x.log'], /--traffic needs the limits to simulate: --policy or --plans/],
    [['--traffic', '/nonexistent.log', '--policy', 'per-second'], /--traffic: .*ENOENT/],
    [['--fields', 'key=a'], /--fields needs --traffic/],
    [['--balancer', 'log'], /--balancer log needs --traffic/],
    [['--plans', '/nonexistent-plans.yaml'], /--plans: .*cannot read the plans file/],
    [['--balancer', 'fastest'], /--balancer: expected round-robin, random, sticky/],
    [['--balancer', 'zipf:x'], /scenario one-key-6x: Invalid `scenario.balancer.s`/],
    [
      ['--policy', 'cheap'],
      /--policy: expected one of per-second, per-minute, per-second-exact, a JSON object or a file with one/,
    ],
    [['--policy', '{"algorithm":"token-bucket"'], /--policy: not valid JSON/],
    [
      ['--policy', '{"algorithm":"token-bucket","rate":-1}'],
      /Invalid `scenario.policy.rate`: expected a positive/,
    ],
    [['--duration', 'soon'], /--duration: expected a duration like 30s/],
    [['--seed', '1.5'], /--seed: expected a whole number/],
    // A negative seed is a whole number to many readers: the message says where the range starts.
    [['--seed', '-1'], /--seed: expected a whole number from 0, got "-1"/],
    [['--replay', '{not json'], /--replay: not valid JSON/],
    [['--replay', '[1]'], /--replay: expected a scenario object/],
    [['--replay', '{"name":"x"}'], /scenario x: Invalid `scenario.durationMs`/],
    [['--replay', '{}', '--scenario', 'step'], /--replay and --scenario cannot be combined/],
    [['--prefix', 'p:'], /--prefix needs --redis/],
    [
      ['--redis', 'redis://127.0.0.1:1', '--scenario', 'step'],
      /--redis: cannot connect to redis:\/\/127.0.0.1:1 \(connection refused: is redis-server running there\?\)/,
    ],
  ])('rejects %j with a message naming the option and exit code 2', async (args, message) => {
    const r = await simInProcess(args);
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toMatch(message);
    expect(r.stderr).toMatch(/Run 'npm run sim -- --help' for the options/);
    expect(r.stdout).toBe('');
  });

  it('as a process: exit code 2 and one message for a bad option, never a stack trace', async () => {
    const [unknown, invalid] = await Promise.all([
      spawnSim(['--frobnicate']),
      spawnSim(['--policy', '{"algorithm":"token-bucket","rate":"fast"}']),
    ]);
    for (const r of [unknown, invalid]) {
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).toMatch(/^sim: /);
      expect(r.stderr, 'no stack trace').not.toMatch(/\n\s+at |Error:/);
    }
  });

  it('as a process: replays a scenario, prints the table and exits 0 when every check passes', async () => {
    const r = await spawnSim(['--replay', JSON.stringify(tiny)]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(
      /^scenario\s+instances\s+balancer\s+demand\s+requests\s+admitted\s+exact\s+drift %/m,
    );
    expect(r.stdout).toMatch(/^tiny\s+4\s+zipf 1\s+3×\s+\d+/m);
    expect(r.stderr, 'no progress bar when stderr is not a terminal').toBe('');
  });

  it('draws the progress bar on a terminal clearing the line each time (no "5%%" left behind)', async () => {
    const writes: string[] = [];
    const code = await run(['--replay', JSON.stringify(tiny)], {
      stdout: { write: () => true },
      stderr: { write: (t: string) => writes.push(t), isTTY: true },
    });
    expect(code).toBe(0);
    const bars = writes.filter((w) => w.includes('['));
    expect(bars.length, 'the bar was drawn').toBeGreaterThan(0);
    for (const w of bars) expect(w.startsWith('\r\x1b[2K'), JSON.stringify(w)).toBe(true);
    expect(writes.at(-1), 'and cleared at the end').toBe('\r\x1b[2K');
  });

  it('creates the --out directory (a fresh clone has no sim/out), and names one it cannot create', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sim-'));
    const out = join(dir, 'sim/out/report.html');
    const r = await simInProcess(['--replay', JSON.stringify(tiny), '--out', out]);
    expect(r.code, r.stderr).toBe(0);
    expect(readFileSync(out, 'utf8')).toMatch(/^<!doctype html>/);
    const file = join(dir, 'a-file');
    writeFileSync(file, '');
    const bad = await simInProcess(['--replay', JSON.stringify(tiny), '--out', join(file, 'report.html')]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(
      /^sim: --out: cannot create the directory of .*a-file\/report.html \(E[A-Z]+\)/,
    );
  });

  it('writes a self-contained HTML report with the four charts', async () => {
    const out = join(mkdtempSync(join(tmpdir(), 'sim-')), 'report.html');
    const r = await simInProcess(['--replay', JSON.stringify(tiny), '--out', out]);
    expect(r.code, r.stderr).toBe(0);
    const html = readFileSync(out, 'utf8');
    expect(html).toMatch(/^<!doctype html>/);
    expect(html.match(/<svg class="chart"/g)?.length, 'four charts for one scenario').toBe(4);
    expect(html, 'nothing loaded from elsewhere').not.toMatch(/<script|<link|src="http/);
  });

  it('prints JSON with --json, and exits 1 when a scenario misses a check', async () => {
    const missing = JSON.stringify({ ...tiny, expect: { maxCallsPerDecision: 0 } });
    const r = await simInProcess(['--replay', missing, '--json']);
    expect(r.code, r.stderr).toBe(1);
    const { store, reports } = JSON.parse(r.stdout);
    expect(store).toBe('MemoryStore');
    expect(reports[0].scenario.name).toBe('tiny');
    expect(reports[0].checks.find((c: { name: string }) => c.name === 'store calls')).toMatchObject({
      ok: false,
    });
  });

  it('reports a missed target of a pending scenario without failing the run, unless --strict', async () => {
    const pending = JSON.stringify({ ...tiny, expect: { maxCallsPerDecision: 0 }, pending: 'issue 11' });
    const lenient = await simInProcess(['--replay', pending]);
    expect(lenient.code, lenient.stderr).toBe(0);
    expect(lenient.stdout).toMatch(/^tiny .*✗ pending$/m);
    expect(lenient.stdout).toMatch(/✗ tiny: store calls: .* \[target of issue 11\]/);
    const strict = await simInProcess(['--replay', pending, '--strict']);
    expect(strict.code, 'a missed target fails under --strict').toBe(1);
  });

  it('checks the worst drift over the run against the drift target, after the warm-up', async () => {
    // retry-honour with seed 5 ends within 2 % but dips below -2 % early in the run (with the
    // suite's own seed it stays within; docs/accuracy.md gives the range over seeds 1-5).
    const retry = SUITE.find((s) => s.name === 'retry-honour')!;
    const { worstDriftPending: _, ...expect2 } = retry.expect!;
    const failing = await simInProcess([
      '--replay',
      JSON.stringify({ ...retry, seed: 5, expect: expect2 }),
      '--json',
    ]);
    expect(failing.code, 'a worst drift outside the target fails the run').toBe(1);
    const checks = JSON.parse(failing.stdout).reports[0].checks as {
      name: string;
      ok: boolean;
      detail: string;
    }[];
    expect(checks.find((c) => c.name === 'drift')?.ok, 'the final drift is within').toBe(true);
    const worst = checks.find((c) => c.name === 'worst drift')!;
    expect(worst.ok).toBe(false);
    expect(worst.detail).toMatch(
      /after the warm-up \(until the exact limiter has admitted 10 % of its total\)/,
    );
    const selected = ['--scenario', 'retry-honour', '--seed', '5'];
    const suite = await simInProcess(selected);
    expect(suite.code, 'in the suite it is a pending target').toBe(0);
    expect(suite.stdout).toMatch(
      /✗ retry-honour: worst drift: .* \[target of open work: the drift over the run/,
    );
    expect((await simInProcess([...selected, '--strict'])).code).toBe(1);
  });

  it('selects scenarios by prefix with a trailing *', async () => {
    const r = await simInProcess(['--scenario', 'tail-1k-*', '--duration', '300ms', '--json']);
    const names = JSON.parse(r.stdout).reports.map((x: { scenario: { name: string } }) => x.scenario.name);
    expect(names).toEqual(['tail-1k-10rps-rr', 'tail-1k-1000rps-zipf']);
  });

  it('applies --instances, --balancer, --policy, --duration and --seed to the selected scenarios', async () => {
    const r = await simInProcess([
      '--scenario',
      'step',
      '--instances',
      '3',
      '--balancer',
      'weighted:3,1',
      '--policy',
      'per-second-exact',
      '--duration',
      '2s',
      '--seed',
      '9',
      '--json',
    ]);
    expect(r.code, r.stderr).toBe(0);
    const { scenario } = JSON.parse(r.stdout).reports[0];
    expect(scenario).toMatchObject({
      name: 'step',
      instances: 3,
      autoscale: [],
      balancer: { kind: 'weighted', weights: [3, 1] },
      policy: { lease: 'exact' },
      durationMs: 2000,
      seed: 9,
      // The step is rescaled with the timeline: 15 s of 30 s becomes 1 s of 2 s.
      traffic: { demand: { shape: 'step', atMs: 1000 } },
    });
  });
});

describe("--duration reads the library's durations", () => {
  // It had its own parser: no 'd', no '1 s', though the policies it simulates take both.
  it.each([
    ['300', 300],
    ['500ms', 500],
    ['1.5s', 1500],
    ['2 m', 120_000],
    ['1d', 86_400_000],
  ])('%j is %d ms', (text, ms) => {
    expect(parseDuration(text)).toBe(ms);
  });

  it.each(['soon', '-1', '0', '1 minute', ' 30s'])('%j is a usage error', (text) => {
    expect(() => parseDuration(text)).toThrow(/--duration: expected a duration like 30s, 2m or 500ms/);
  });
});
