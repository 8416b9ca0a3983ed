import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, inject, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

// Benchmarks are not tests: this only checks that the suite runs end to end and prints its table.
// Timings are never asserted. Keys it writes to the shared server carry a run prefix and a TTL.
describe('npm run bench -- --smoke', () => {
  it('runs every section against the shared Redis and prints one table and the targets', async () => {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ['--import', 'tsx', 'bench/run.ts', '--smoke', '--no-pin', `--redis-url=${inject('redisUrl')}`],
      { cwd: ROOT, timeout: 60_000, maxBuffer: 1 << 22 },
    );
    const lines = stdout.split('\n');
    const header = lines.findIndex((l) => /^\| bench\s+\| case\s+\| contestant/.test(l));
    expect(header, `no results table in:\n${stdout}`).toBeGreaterThanOrEqual(0);
    const rows = lines.slice(header + 2).filter((l) => l.startsWith('|'));
    const benches = new Set(rows.map((r) => r.split('|')[1]?.trim()));
    expect([...benches], 'every section reports rows').toEqual(
      expect.arrayContaining([
        'micro',
        'metrics',
        'latency-redis',
        'tail-redis',
        'fleet-redis',
        'http',
        'adapter',
        'adapter-cpu',
        'memory',
      ]),
    );
    for (const contestant of ['Map bucket (floor)', 'tokenlease MemoryStore', 'tokenlease RedisStore']) {
      expect(stdout, `a row for ${contestant}`).toContain(`| ${contestant}`);
    }
    expect(stdout, 'the targets table').toMatch(/^\| target\s+\| measured\s+\| verdict/m);
    expect(stdout, 'versions and date head the output').toMatch(/^date \S+ · commit .* · node v\d+/m);
  }, 60_000);
});
