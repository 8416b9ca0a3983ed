import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { type DecisionEvent, decisionLog, Limiter, MemoryStore } from '../../src/index.js';
import { prometheusObserver } from '../../src/observe/prometheus.js';
import { type Running, startServer, tokenBucket, virtualClock } from '../http/servers.js';

let cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const fn of cleanup.reverse()) await fn();
  cleanup = [];
});

describe('observability through the HTTP middleware', () => {
  it('counts a shadow rule that would refuse as shadow-denied, and logs each refusal with its route', async () => {
    const clock = virtualClock();
    const registry = new Registry();
    const records: DecisionEvent[] = [];
    const limiter = new Limiter({
      store: new MemoryStore({ now: clock.now }),
      policies: { 'per-client': tokenBucket(1, '1m', 2), daily: tokenBucket(100, '1d', 3) },
      now: clock.now,
      sweepIntervalMs: 0,
      observers: [prometheusObserver({ registry }), decisionLog({ log: (r) => records.push(r) })],
    });
    const server: Running = await startServer('node', {
      limiter,
      rules: [{ policy: 'per-client', shadow: true }, { policy: 'daily' }],
      now: clock.now,
    });
    cleanup.push(
      () => limiter.close(),
      () => server.close(),
    );
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) statuses.push((await fetch(`${server.url}/users/${i}`)).status);
    // daily (burst 3) refuses the 4th; per-client (burst 2) would have refused the 3rd, in shadow.
    expect(statuses).toEqual([200, 200, 200, 429]);
    const text = await registry.metrics();
    const lines = text.split('\n').filter((l) => l.startsWith('tokenlease_decisions_total{'));
    // The second request left per-client empty and nothing was fetched ahead: the store refuses.
    expect(lines.filter((l) => l.includes('outcome="shadow-denied"'))).toEqual([
      'tokenlease_decisions_total{policy="per-client",outcome="shadow-denied",source="store"} 1',
    ]);
    // node:http has no route templates: the route is the normalised path (one reason routes are
    // carried into logs and events, never into metric labels).
    expect(records.map((r) => [r.policy, r.outcome, r.route])).toEqual([
      ['per-client', 'shadow-denied', 'GET /users/2'],
      ['daily', 'denied', 'GET /users/3'],
    ]);
  });
});
