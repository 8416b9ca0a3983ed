// Counts of the ported upstream suites, from a vitest JSON report:
//   npx vitest run test/compat --reporter=json --outputFile=/tmp/compat.json
//   node test/compat/counts.mjs /tmp/compat.json
// Applicable = upstream tests less the not-applicable ones (and those skipped upstream); the
// applicable ones not passing are the deliberately different (run as expected failures where their
// body can run) and the not-yet-supported.
import { readFileSync } from 'node:fs';

const report = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const suites = {};
for (const file of report.testResults) {
  const name = file.name.split('test/compat/')[1];
  if (name.includes('behaviour')) continue; // tokenlease's own tests, not upstream ones
  const suite = name.startsWith('express') ? 'express-rate-limit' : '@fastify/rate-limit';
  suites[suite] ??= {};
  const c = suites[suite];
  for (const t of file.assertionResults) {
    // A deliberately different test runs as an expected failure: passing means it still differs.
    const tag = /\[(not applicable|deliberately different|skipped upstream)/.exec(t.title)?.[1];
    const kind = t.status === 'failed' ? 'failed' : (tag ?? t.status);
    c[kind] = (c[kind] ?? 0) + 1;
  }
}
for (const [suite, c] of Object.entries(suites)) {
  const total = Object.values(c).reduce((a, b) => a + b, 0);
  const notApplicable = (c['not applicable'] ?? 0) + (c['skipped upstream'] ?? 0);
  console.log(
    `${suite}: ${total} upstream tests, ${total - notApplicable} applicable, ${c.passed ?? 0} passed, ` +
      `${notApplicable} not applicable; applicable not passing: ${c['deliberately different'] ?? 0} deliberately different, ` +
      `${c.failed ?? 0} failed`,
  );
}
