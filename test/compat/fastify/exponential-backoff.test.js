// Ported from @fastify/rate-limit 78a7d41143f5418fef3cfe3ac6b46c944e637dc2, test/exponential-backoff.test.js:
// the original assertions, run through ./mapping.js and ./nodeTest.ts (node:test on vitest).

import { notYetSupported } from '../notApplicable.js';

notYetSupported(
  'Exponential Backoff',
  "exponentialBackoff: a refused request's window grows with each refusal; not built yet (it needs per-key window lengths in the fixed-window policy)",
);

notYetSupported(
  'Global Exponential Backoff',
  "exponentialBackoff: a refused request's window grows with each refusal; not built yet (it needs per-key window lengths in the fixed-window policy)",
);

notYetSupported(
  'MAx safe Exponential Backoff',
  "exponentialBackoff: a refused request's window grows with each refusal; not built yet (it needs per-key window lengths in the fixed-window policy)",
);
