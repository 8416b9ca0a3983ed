import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const dist = resolve(import.meta.dirname, '../../dist');

/** Every module specifier a built file imports (static imports and re-exports). */
function imports(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  return [...text.matchAll(/^(?:import|export)\s[^;]*?from\s+'([^']+)'/gm)].map((m) => m[1]!);
}

describe('the built package: observability', () => {
  it("never loads prom-client from the core entry point (it is an optional peer of 'tokenlease/prometheus')", () => {
    const seen = new Set<string>();
    const external = new Set<string>();
    const visit = (file: string) => {
      if (seen.has(file)) return;
      seen.add(file);
      for (const spec of imports(file)) {
        if (spec.startsWith('.')) visit(join(dirname(file), spec));
        else external.add(spec);
      }
    };
    visit(join(dist, 'index.js'));
    expect(seen.size, 'walked the import graph').toBeGreaterThan(10);
    expect(external, 'sees the runtime dependencies').toContain('lru-cache');
    expect([...external].sort()).not.toContain('prom-client');
    expect([...external].filter((m) => m.startsWith('@opentelemetry/'))).toEqual([]);
  });

  it("loads 'tokenlease/opentelemetry' without @opentelemetry/api at run time (it uses only its types)", () => {
    expect(imports(join(dist, 'observe/opentelemetry.js')).filter((m) => !m.startsWith('.'))).toEqual([]);
  });

  it("serves Prometheus metrics through 'tokenlease/prometheus' in plain Node ESM", () => {
    const script = `
      import { Registry } from 'prom-client';
      import { Limiter } from 'tokenlease';
      import { prometheusObserver } from 'tokenlease/prometheus';
      const registry = new Registry();
      const l = new Limiter({
        policies: { p: { algorithm: 'token-bucket', rate: 2, lease: 'exact' } },
        observers: [prometheusObserver({ registry, prefix: 'gw_' })],
      });
      for (let i = 0; i < 3; i++) await l.consume('p', 'k');
      await l.close();
      const text = await registry.metrics();
      console.log(text.split('\\n').filter((s) => s.startsWith('gw_decisions_total')).join('\\n'));
    `;
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
    expect(out.trim().split('\n')).toEqual([
      'gw_decisions_total{policy="p",outcome="allowed",source="store"} 2',
      'gw_decisions_total{policy="p",outcome="denied",source="store"} 1',
    ]);
  });
});
