// Counts of the ported upstream suites, from a vitest JSON report:
//   npx vitest run test/compat --reporter=json --outputFile=/tmp/compat.json
//   node test/compat/counts.mjs /tmp/compat.json
// The not-applicable upstream tests (those skipped upstream included) are no tests but entries of
// test/compat/notApplicable.ts's registry, which test/compat/notApplicable.test.ts reports in its
// test's `meta.notApplicable`. The applicable ones are the tests the ported files run; those not
// passing are the deliberately different (run as expected failures where their body can run) and
// the not-yet-supported.
import { readFileSync } from 'node:fs';

const report = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const suiteNames = { express: 'express-rate-limit', fastify: '@fastify/rate-limit' };
const suites = {};
let registry;
for (const file of report.testResults) {
  const name = file.name.split('test/compat/')[1];
  registry ??= file.assertionResults.find((t) => t.meta?.notApplicable)?.meta.notApplicable;
  const suite = suiteNames[name.split('/')[0]];
  // behaviour.test.ts holds tokenlease's own tests, not upstream ones.
  if (suite === undefined || name.includes('behaviour')) continue;
  suites[suite] ??= { 'not applicable': 0 };
  const c = suites[suite];
  for (const t of file.assertionResults) {
    // A deliberately different test runs as an expected failure: passing means it still differs.
    const tag = /\[(deliberately different)/.exec(t.title)?.[1];
    const kind = t.status === 'failed' ? 'failed' : (tag ?? t.status);
    c[kind] = (c[kind] ?? 0) + 1;
  }
}
if (registry === undefined) {
  console.error('no meta.notApplicable in the report: run it over all of test/compat');
  process.exit(1);
}
for (const { suite } of registry) suites[suiteNames[suite]]['not applicable']++;
for (const [suite, c] of Object.entries(suites)) {
  const total = Object.values(c).reduce((a, b) => a + b, 0);
  const notApplicable = c['not applicable'];
  console.log(
    `${suite}: ${total} upstream tests, ${total - notApplicable} applicable, ${c.passed ?? 0} passed, ` +
      `${notApplicable} not applicable; applicable not passing: ${c['deliberately different'] ?? 0} deliberately different, ` +
      `${c.failed ?? 0} failed`,
  );
}
