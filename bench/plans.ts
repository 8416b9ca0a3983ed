/**
 * `npx tsx bench/plans.ts [--keys=1000,32000,100000] [--rounds=5]` (after `npm run build`): how
 * long `Plans.parse` takes for a plans file with that many API keys, YAML and JSON. A reload
 * parses on the event loop, so this is also how long every watching gateway stalls per reload.
 * Target (issue 13): 100 000 keys in under 1 s. Prints one table; progress goes to stderr.
 */
import { parseArgs } from 'node:util';
import { summarize } from './stats.js';
import { entryPoint } from './tokenlease.js';

const { Plans } = await entryPoint<typeof import('../src/http/index.js')>('http');

const { values } = parseArgs({
  options: {
    keys: { type: 'string', default: '1000,32000,100000' },
    rounds: { type: 'string', default: '5' },
  },
});
const sizes = values.keys.split(',').map(Number);
const rounds = Number(values.rounds);

const HEAD =
  'plans:\n  free:\n    rules:\n      per-key: { rate: 5, period: 1s }\n  pro:\n    rules:\n      per-key: { rate: 100, period: 1s }\n';

function yamlFile(n: number): string {
  const lines = [HEAD, 'keys:\n'];
  for (let i = 0; i < n; i++)
    lines.push(`  k_live_${i.toString(36).padStart(10, '0')}: ${i % 10 ? 'free' : 'pro'}\n`);
  return lines.join('');
}

function jsonFile(n: number): string {
  const keys: Record<string, string> = {};
  for (let i = 0; i < n; i++) keys[`k_live_${i.toString(36).padStart(10, '0')}`] = i % 10 ? 'free' : 'pro';
  const plans = {
    free: { rules: { 'per-key': { rate: 5, period: '1s' } } },
    pro: { rules: { 'per-key': { rate: 100, period: '1s' } } },
  };
  return JSON.stringify({ plans, keys }, null, 2);
}

console.log('| format | API keys | file size | parse, median ms ± SE | keys per second |');
console.log('| --- | ---: | ---: | ---: | ---: |');
for (const [format, make] of [
  ['YAML', yamlFile],
  ['JSON', jsonFile],
] as const) {
  for (const n of sizes) {
    const text = make(n);
    const times: number[] = [];
    for (let r = 0; r < rounds; r++) {
      const t0 = performance.now();
      const plans = Plans.parse(text, `plans.${format.toLowerCase()}`);
      times.push(performance.now() - t0);
      if (plans.ruleSet().keys.size !== n) throw new Error(`expected ${n} keys`);
    }
    const s = summarize(times);
    process.stderr.write(`[bench] plans ${format} ${n}: ${times.map((t) => t.toFixed(0)).join(' ')} ms\n`);
    const kb = (text.length / 1024).toFixed(0);
    console.log(
      `| ${format} | ${n} | ${kb} KiB | ${s.median.toFixed(0)} ± ${s.se.toFixed(0)} | ${Math.round(n / (s.median / 1000))} |`,
    );
  }
}
