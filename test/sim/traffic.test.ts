import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { type LogRecord, parseTime, readLog, type SkippedLines } from '../../sim/traffic.js';
import { ConfigError } from '../../src/index.js';
import { simInProcess } from '../support/sim.js';

const dir = mkdtempSync(join(tmpdir(), 'sim-traffic-'));
const root = join(import.meta.dirname, '../..');

async function read(name: string, text: string, options = {}, skipped?: SkippedLines): Promise<LogRecord[]> {
  const path = join(dir, name);
  writeFileSync(path, text);
  const out: LogRecord[] = [];
  for await (const r of readLog(path, options, skipped)) out.push(r);
  return out;
}

describe('request logs', () => {
  it('reads JSON lines with the usual column names, costs and instances', async () => {
    const records = await read(
      'a.jsonl',
      '{"ts":1700000000.250,"api_key":"k1","cost":3,"method":"POST","path":"/x?y=1","pod":"gw-a"}\n\n' +
        '{"timestamp":"2023-11-14T22:13:20.500Z","user":"u2"}\n',
    );
    expect(records).toEqual([
      { timeMs: 1_700_000_000_250, key: 'k1', cost: 3, method: 'POST', path: '/x', instance: 'gw-a' },
      {
        timeMs: 1_700_000_000_500,
        key: 'u2',
        cost: 1,
        method: undefined,
        path: undefined,
        instance: undefined,
      },
    ]);
  });

  it("reads the client's IP apart from its key: ip columns, the first X-Forwarded-For hop, --fields ip=", async () => {
    const records = await read(
      'ips.jsonl',
      '{"ts":1,"api_key":"k1","client_ip":"203.0.113.9"}\n' +
        '{"ts":2,"api_key":"k1","x_forwarded_for":"198.51.100.7, 10.0.0.1"}\n' +
        '{"ts":3,"api_key":"k2"}\n',
    );
    expect(records.map((r) => [r.key, r.ip])).toEqual([
      ['k1', '203.0.113.9'],
      ['k1', '198.51.100.7'],
      ['k2', undefined],
    ]);
    const mapped = await read('ips2.jsonl', '{"ts":1,"api_key":"k1","addr":"192.0.2.1"}\n', {
      fields: { ip: 'addr' },
    });
    expect(mapped[0]?.ip).toBe('192.0.2.1');
  });

  it('reads CSV with a header and a field mapping', async () => {
    const records = await read(
      'a.csv',
      'when,who,units,host\n1700000000000,"a,b",2,n1\n1700000000010,c,1,n2\n',
      {
        fields: { time: 'when', key: 'who', cost: 'units', instance: 'host' },
      },
    );
    expect(records.map((r) => [r.timeMs, r.key, r.cost, r.instance])).toEqual([
      [1_700_000_000_000, 'a,b', 2, 'n1'],
      [1_700_000_000_010, 'c', 1, 'n2'],
    ]);
  });

  it('reads nginx combined lines, spreading the requests of one second evenly over it', async () => {
    const line = (ip: string, extra = '') =>
      `${ip} - - [14/Nov/2023:22:13:20 +0000] "GET /items?id=1 HTTP/1.1" 200 12 "-" "curl/8"${extra}`;
    const records = await read(
      'access.log',
      [line('10.0.0.1'), line('10.0.0.2', ' "k_live" "gw-1"')].join('\n'),
    );
    expect(records).toEqual([
      {
        timeMs: 1_700_000_000_000,
        key: '10.0.0.1',
        cost: 1,
        method: 'GET',
        path: '/items',
        instance: undefined,
        ip: '10.0.0.1',
      },
      {
        timeMs: 1_700_000_000_500,
        key: 'k_live',
        cost: 1,
        method: 'GET',
        path: '/items',
        instance: 'gw-1',
        ip: '10.0.0.2',
      },
    ]);
  });

  it("reads Envoy's default format; the client is the first X-Forwarded-For address", async () => {
    const records = await read(
      'envoy.log',
      '[2016-04-15T20:17:00.310Z] "POST /api/v1/locations HTTP/2" 204 - 154 0 226 100 "10.0.35.28, 10.0.0.1" "nsq2http" "cc21d9b0" "locations" "tcp://10.0.2.1:80"\n',
    );
    expect(records).toEqual([
      {
        timeMs: Date.parse('2016-04-15T20:17:00.310Z'),
        key: '10.0.35.28',
        cost: 1,
        method: 'POST',
        path: '/api/v1/locations',
        instance: undefined,
        ip: '10.0.35.28',
      },
    ]);
  });

  it('skips and counts lines it cannot read, and names the line when none can be read', async () => {
    const skipped: SkippedLines = { count: 0, first: undefined };
    const records = await read(
      'mixed.jsonl',
      '{"ts":1,"key":"a"}\nnot json\n{"key":"b"}\n{"ts":2,"key":"c","cost":-1}\n',
      {},
      skipped,
    );
    expect(records.map((r) => r.key)).toEqual(['a']);
    expect(skipped.count).toBe(3);
    expect(skipped.first).toMatch(/mixed\.jsonl:2: not a JSON object \(format jsonl\)/);
    const bad = read('bad.jsonl', '{"time":"yesterday","key":"a"}\n');
    await expect(bad).rejects.toThrow(ConfigError);
    await expect(bad).rejects.toThrow(/bad\.jsonl:1: cannot read the time "yesterday" in column `time`/);
  });

  it('parses epoch seconds, epoch ms, ISO 8601 and nginx times with their resolution', () => {
    expect(parseTime(1_700_000_000)).toEqual({ ms: 1_700_000_000_000, resolutionMs: 1000 });
    expect(parseTime('1700000000123')).toEqual({ ms: 1_700_000_000_123, resolutionMs: 1 });
    expect(parseTime('2023-11-14T22:13:20Z')).toEqual({ ms: 1_700_000_000_000, resolutionMs: 1000 });
    expect(parseTime('14/Nov/2023:23:13:20 +0100')).toEqual({ ms: 1_700_000_000_000, resolutionMs: 1000 });
    expect(parseTime('soon')).toBeUndefined();
  });
});

describe('npm run sim -- --traffic', () => {
  const example = (name: string) => join(root, 'sim/examples', name);

  it('replays the shipped example log through its instance column under the shipped plans', async () => {
    const r = await simInProcess([
      '--plans',
      example('plans.yaml'),
      '--traffic',
      example('access.log'),
      '--json',
    ]);
    expect(r.code, r.stderr).toBe(0);
    const [report] = JSON.parse(r.stdout).reports;
    expect(report.summary.requests, 'every line of the log').toBe(1669);
    expect(report.instances.map((i: { name: string }) => i.name).sort()).toEqual([
      'gw-1',
      'gw-2',
      'gw-3',
      'gw-4',
    ]);
    expect(report.summary.exactRequests, 'the plans refuse some requests').toBeLessThan(1669);
    expect(report.summary.storeCalls).toBeGreaterThan(0);
    expect(report.summary.roundTrips).toBeLessThanOrEqual(report.summary.storeCalls);
    expect(report.summary.keyClasses.map((c: { name: string }) => c.name)).toEqual([
      'heaviest 2',
      'tail 110',
    ]);
    expect(report.summary.envelopes.map((e: { policy: string }) => e.policy).sort()).toEqual([
      'free/per-key',
      'pro/per-key',
    ]);
    expect(
      report.checks.every((c: { ok: boolean }) => c.ok),
      JSON.stringify(report.checks),
    ).toBe(true);
  });

  it('runs a fleet what-if over instance counts and lease sizes', async () => {
    const r = await simInProcess([
      '--policy',
      'per-second',
      '--traffic',
      example('access.log'),
      '--instances',
      '2,8',
      '--max-fraction',
      '0.05,0.2',
      '--json',
    ]);
    expect(r.code, r.stderr).toBe(0);
    const { reports, fleets } = JSON.parse(r.stdout);
    expect(reports).toHaveLength(4);
    expect(fleets).toHaveLength(1);
    expect(
      fleets[0].points.map((p: { instances: number; maxFraction: number }) => [p.instances, p.maxFraction]),
    ).toEqual([
      [2, 0.05],
      [2, 0.2],
      [8, 0.05],
      [8, 0.2],
    ]);
    expect(reports[3].scenario.policy.lease).toEqual({ maxFraction: 0.2 });
  });
});
