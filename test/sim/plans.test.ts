import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { addressOf, plansFile } from '../../sim/deployment.js';
import { Limiter, MemoryStore } from '../../src/index.js';
import { simInProcess } from '../support/sim.js';

const dir = mkdtempSync(join(tmpdir(), 'sim-plans-'));

/** A plans file with a rule keyed by IP for every request, and one keyed by the client in each plan. */
function plansWithIpRule(): string {
  const path = join(dir, 'plans.yaml');
  writeFileSync(
    path,
    [
      'defaultPlan: free',
      'rules:',
      '  per-ip: { rate: 20, burst: 20, by: ip }',
      'plans:',
      '  free: { rules: { per-key: { rate: 5, burst: 10 } } }',
      '  pro: { rules: { per-key: { rate: 50, burst: 100 } } }',
      'keys: { k_pro: pro }',
      '',
    ].join('\n'),
  );
  return path;
}

describe('a plans deployment in the simulator', () => {
  it('counts rules keyed by IP by the request’s IP, and each client key apart when there is none', async () => {
    const deployment = plansFile(plansWithIpRule());
    const limiter = new Limiter({
      store: new MemoryStore(),
      policies: deployment.policies,
      sweepIntervalMs: 0,
    });
    const gateway = deployment.gateway(limiter);
    const ipKey = async (req: { key: string; ip?: string }) => {
      const d = await gateway({ ...req, cost: 1, attempt: 0 });
      return d.checks.find((c) => c.policy === '*/per-ip')?.key;
    };
    const a = await ipKey({ key: 'k1', ip: '203.0.113.1' });
    expect(await ipKey({ key: 'k2', ip: '203.0.113.1' }), 'one IP, two clients: one bucket').toBe(a);
    expect(await ipKey({ key: 'k1', ip: '203.0.113.2' }), 'another IP: another bucket').not.toBe(a);
    const noIp = [await ipKey({ key: 'k3' }), await ipKey({ key: 'k4' })];
    expect(noIp[0], 'without an IP, each client key has an address of its own').not.toBe(noIp[1]);
    expect(addressOf('k3')).toMatch(/^10\.\d+\.\d+\.\d+$/);
    expect(deployment.primary, "the default plan's rule").toBe('free/per-key');
    await limiter.close();
  });

  it('--plans without --traffic runs each scenario through every rule of the plans file', async () => {
    const r = await simInProcess([
      '--plans',
      plansWithIpRule(),
      '--scenario',
      'near-limit',
      '--duration',
      '5s',
      '--json',
    ]);
    expect(r.code, r.stderr).toBe(0);
    const { reports } = JSON.parse(r.stdout);
    expect(reports).toHaveLength(1);
    const [report] = reports;
    expect(report.scenario.description).toContain('Through');
    expect(
      report.summary.envelopes.map((e: { policy: string }) => e.policy).sort(),
      'the global per-ip rule and the default plan’s rule, checked together',
    ).toEqual(expect.arrayContaining(['*/per-ip', 'free/per-key']));
    expect(report.summary.requests).toBeGreaterThan(10);
  });
});
