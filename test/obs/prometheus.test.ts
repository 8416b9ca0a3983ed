import { Redis } from 'ioredis';
import { register as globalRegistry, Registry } from 'prom-client';
import { afterAll, describe, expect, it, vi } from 'vitest';
import {
  ConfigError,
  Limiter,
  MemoryStore,
  type ObservedLimiter,
  type PolicyConfig,
  RedisStore,
} from '../../src/index.js';
import { prometheusObserver } from '../../src/observe/prometheus.js';
import { closeAllClients, trackClient, uniquePrefix } from '../support/clients.js';
import { closedAfterEach } from '../support/closedAfterEach.js';
import { startRedis } from '../support/redisServer.js';

afterAll(closeAllClients);

const policies: Record<string, PolicyConfig> = {
  exact: { algorithm: 'token-bucket', rate: 10, burst: 10, lease: 'exact' },
  leased: { algorithm: 'token-bucket', rate: 100, burst: 100 },
};

const open = closedAfterEach();

function setup(extra: Partial<ConstructorParameters<typeof Limiter>[0]> = {}) {
  let t = 1_000_000;
  const now = () => t;
  const registry = new Registry();
  const limiter = new Limiter({
    store: new MemoryStore({ now }),
    policies,
    now,
    sweepIntervalMs: 0,
    observers: [prometheusObserver({ registry })],
    ...extra,
  });
  open.push(limiter);
  return { limiter, registry, advance: (ms: number) => (t += ms) };
}

/** Lets background lease refills finish, so each step starts from a settled state. */
const settle = () => new Promise((resolve) => setImmediate(resolve));

/** The sample lines of a metric family, without HELP/TYPE, in the registry's order. */
async function samples(registry: Registry, name: string): Promise<string[]> {
  const text = await registry.metrics();
  return text.split('\n').filter((line) => line.startsWith(`${name}{`) || line.startsWith(`${name} `));
}

describe('prometheusObserver', () => {
  it('counts decisions, store calls and leases exactly after a known sequence', async () => {
    const { limiter, registry, advance } = setup();
    // Exact mode: one store call per decision; the 11th is refused by the store, the 12th by the
    // remembered denial without a store call.
    for (let i = 0; i < 12; i++) await limiter.consume('exact', 'a');
    // Leased: the first two decisions wait for 1-token leases (one request is no demand worth
    // fetching ahead for); refill-ahead keeps the other 28 local, with leases growing by slow start
    // and demand up to 10 % of 100.
    for (let i = 0; i < 30; i++) {
      await limiter.consume('leased', 'b');
      await settle();
    }
    expect((await limiter.consume('leased', 'c', 500)).retryAfterMs, 'cost above burst').toBe(Infinity);
    // The 12 unused tokens of 'b' expire and are handed back.
    advance(10_000);
    limiter.sweep();
    await settle();

    expect(await samples(registry, 'tokenlease_decisions_total')).toEqual([
      'tokenlease_decisions_total{policy="exact",outcome="allowed",source="store"} 10',
      'tokenlease_decisions_total{policy="exact",outcome="denied",source="lease"} 1',
      'tokenlease_decisions_total{policy="exact",outcome="denied",source="store"} 1',
      'tokenlease_decisions_total{policy="leased",outcome="allowed",source="lease"} 28',
      'tokenlease_decisions_total{policy="leased",outcome="allowed",source="store"} 2',
      'tokenlease_decisions_total{policy="leased",outcome="denied",source="lease"} 1',
    ]);
    expect(await samples(registry, 'tokenlease_rate_limited_total')).toEqual([
      'tokenlease_rate_limited_total{policy="exact",reason="limit"} 2',
      'tokenlease_rate_limited_total{policy="leased",reason="cost-above-limit"} 1',
    ]);
    expect(await samples(registry, 'tokenlease_store_calls_total')).toEqual([
      // Exact mode acquires; leases, their return and usage reports are syncs; one heartbeat.
      'tokenlease_store_calls_total{op="token_bucket_acquire"} 11',
      'tokenlease_store_calls_total{op="token_bucket_sync"} 11',
      'tokenlease_store_calls_total{op="fleet_heartbeat"} 1',
    ]);
    expect(await samples(registry, 'tokenlease_store_call_duration_seconds_count')).toEqual([
      'tokenlease_store_call_duration_seconds_count{op="token_bucket_acquire"} 11',
      'tokenlease_store_call_duration_seconds_count{op="token_bucket_sync"} 11',
      'tokenlease_store_call_duration_seconds_count{op="fleet_heartbeat"} 1',
    ]);
    expect(await samples(registry, 'tokenlease_store_errors_total')).toEqual([]);
    expect(await samples(registry, 'tokenlease_leases_granted_total')).toEqual([
      'tokenlease_leases_granted_total{policy="leased"} 10',
    ]);
    expect(await samples(registry, 'tokenlease_leased_tokens_total')).toEqual([
      'tokenlease_leased_tokens_total{policy="leased"} 42',
    ]);
    expect(await samples(registry, 'tokenlease_leases_returned_total')).toEqual([
      'tokenlease_leases_returned_total{policy="leased",reason="expired"} 1',
    ]);
    expect(await samples(registry, 'tokenlease_returned_tokens_total')).toEqual([
      'tokenlease_returned_tokens_total{policy="leased"} 12',
    ]);
    // 'b' expired and went idle, 'a' is idle, and so is 'c': a cost no lease can serve is not
    // demand that sizes leases, so nothing keeps its state.
    expect(await samples(registry, 'tokenlease_local_keys')).toEqual(['tokenlease_local_keys 0']);
    expect(await samples(registry, 'tokenlease_top_denied')).toEqual([
      ...[2, 0, 0, 0, 0].map((v, i) => `tokenlease_top_denied{policy="exact",rank="${i + 1}"} ${v}`),
      ...[1, 0, 0, 0, 0].map((v, i) => `tokenlease_top_denied{policy="leased",rank="${i + 1}"} ${v}`),
    ]);

    // stats() agrees with the scrape.
    const stats = limiter.stats();
    expect(stats).toMatchObject({
      decisions: 43,
      localDecisions: 30,
      storeCalls: 22,
      leasesGranted: 10,
      tokensLeased: 42,
      tokensReturned: 12,
      leasesReturned: 1,
      leasesExpired: 1,
      tokensStranded: 0,
      keys: 0,
    });
    expect(stats.outcomes).toEqual({
      allowed: 40,
      denied: 3,
      'shadow-denied': 0,
      'failed-open': 0,
      'failed-closed': 0,
    });
    expect(stats.storeLatencyMs).toBeGreaterThan(0);
  });

  it('counts decisions without decision events, and once when the observer is given a decision() too', async () => {
    const registry = new Registry();
    const observer = prometheusObserver({ registry });
    expect(observer.decision, 'the counts are read from the limiter on a scrape').toBeUndefined();
    const seen: string[] = [];
    observer.decision = (e) => {
      seen.push(`${e.policy}:${e.outcome}`);
    };
    const { limiter } = setup({ observers: [observer] });
    await limiter.consume('exact', 'a');
    await limiter.consume('leased', 'b');
    expect(seen).toEqual(['exact:allowed', 'leased:allowed']);
    expect(await samples(registry, 'tokenlease_decisions_total')).toEqual([
      'tokenlease_decisions_total{policy="exact",outcome="allowed",source="store"} 1',
      'tokenlease_decisions_total{policy="leased",outcome="allowed",source="store"} 1',
    ]);
  });

  it('accumulates between scrapes without double counting', async () => {
    const { limiter, registry } = setup();
    await limiter.consume('exact', 'a');
    await registry.metrics();
    await limiter.consume('exact', 'a');
    expect(await samples(registry, 'tokenlease_decisions_total')).toEqual([
      'tokenlease_decisions_total{policy="exact",outcome="allowed",source="store"} 2',
    ]);
  });

  it('never puts a client key in a label, even under a flood of denied keys', async () => {
    const { limiter, registry } = setup();
    const keys = Array.from({ length: 2000 }, (_, i) => `secret-api-key-${i.toString(36)}-{tag}`);
    for (let round = 0; round < 3; round++) {
      for (const [i, key] of keys.entries()) await limiter.consume('exact', key, i % 7 === 0 ? 11 : 10);
    }
    const text = await registry.metrics();
    expect(text).not.toContain('secret-api-key');
    const labelValues = new Set<string>();
    for (const match of text.matchAll(/(\w+)="([^"]*)"/g)) labelValues.add(`${match[1]}=${match[2]}`);
    const allowed =
      /^(policy=(exact|leased)|outcome=(allowed|denied)|source=(lease|store)|reason=(limit|cost-above-limit)|op=token_bucket_(acquire|release)|rank=[1-5]|state=(closed|open|half-open)|le=.*)$/;
    for (const label of labelValues) expect(label, 'a bounded label value').toMatch(allowed);
    // The keys are still answerable through the API.
    expect(limiter.topDenied('exact', 1)[0]?.key).toMatch(/^secret-api-key-/);
  });

  it('exports the top offenders by rank, with their share of recent denials', async () => {
    const { limiter, registry } = setup();
    for (let i = 0; i < 10; i++) await limiter.consume('exact', 'heavy');
    for (let i = 0; i < 30; i++) await limiter.consume('exact', 'heavy', 11); // 30 denials
    for (let i = 0; i < 10; i++) await limiter.consume('exact', `light-${i}`, 11); // 1 each
    expect(limiter.topDenied('exact', 2)).toEqual([
      { key: 'heavy', count: 30, error: 0 },
      { key: 'light-0', count: 1, error: 0 },
    ]);
    expect((await samples(registry, 'tokenlease_top_denied_share')).slice(0, 2)).toEqual([
      'tokenlease_top_denied_share{policy="exact",rank="1"} 0.75',
      'tokenlease_top_denied_share{policy="exact",rank="2"} 0.025',
    ]);
  });

  it('exports top offenders only for policies with recent denials, following setPolicies', async () => {
    const { limiter, registry } = setup();
    expect(await samples(registry, 'tokenlease_top_denied'), 'no denials yet').toEqual([]);
    limiter.setPolicies({ ...policies, added: policies.exact! });
    await limiter.consume('added', 'k', 11);
    expect(await samples(registry, 'tokenlease_top_denied')).toEqual(
      [1, 0, 0, 0, 0].map((v, i) => `tokenlease_top_denied{policy="added",rank="${i + 1}"} ${v}`),
    );
  });

  it('writes only to the registry it is given, under its prefix', async () => {
    const before = (await globalRegistry.getMetricsAsJSON()).length;
    const { limiter } = setup();
    const registry = new Registry();
    const other = new Limiter({
      policies,
      sweepIntervalMs: 0,
      observers: [prometheusObserver({ registry, prefix: 'edge_' })],
    });
    open.push(other);
    await limiter.consume('exact', 'a');
    await other.consume('exact', 'a');
    expect((await globalRegistry.getMetricsAsJSON()).length).toBe(before);
    const names = (await registry.getMetricsAsJSON()).map((m) => m.name);
    expect(
      names.every((n) => n.startsWith('edge_')),
      names.join(),
    ).toBe(true);
    expect(names.filter((n) => n.includes('_total')).every((n) => n.endsWith('_total'))).toBe(true);
    expect(names).toContain('edge_store_call_duration_seconds');
  });

  it('a second observer on a registry that has its metrics is a ConfigError naming registry', () => {
    // prom-client's own untyped "already been registered" Error, thrown from the middle of the
    // registrations, left the registry with some metrics of the second observer.
    const registry = new Registry();
    prometheusObserver({ registry });
    const before = registry.getMetricsAsArray().length;
    expect(() => prometheusObserver({ registry })).toThrow(ConfigError);
    expect(() => prometheusObserver({ registry })).toThrow(
      /Invalid `registry`: .*tokenlease_decisions_total.*one observer.*prefix/,
    );
    expect(registry.getMetricsAsArray().length, 'nothing half-registered').toBe(before);
    expect(() => prometheusObserver({ registry, prefix: 'edge_' })).not.toThrow();
  });

  it('an option it does not have is a ConfigError naming it (prefx stayed tokenlease_)', () => {
    const err = (() => {
      try {
        prometheusObserver({ registry: new Registry(), prefx: 'edge_' } as never);
      } catch (e) {
        return e as ConfigError;
      }
    })();
    expect(err).toBeInstanceOf(ConfigError);
    expect(err?.field).toBe('prefx');
  });

  it('sums gauges over every limiter sharing one observer, and forgets a closed one', async () => {
    const registry = new Registry();
    const observer = prometheusObserver({ registry });
    const make = () => new Limiter({ policies, sweepIntervalMs: 0, observers: [observer] });
    const [one, two] = [make(), make()];
    open.push(one, two);
    await one.consume('exact', 'a');
    await two.consume('exact', 'b');
    await two.consume('exact', 'c');
    expect(await samples(registry, 'tokenlease_local_keys')).toEqual(['tokenlease_local_keys 3']);
    await two.close();
    expect(await samples(registry, 'tokenlease_local_keys')).toEqual(['tokenlease_local_keys 1']);
    expect(await samples(registry, 'tokenlease_decisions_total'), 'a closed limiter stays counted').toEqual([
      'tokenlease_decisions_total{policy="exact",outcome="allowed",source="store"} 3',
    ]);
    await one.consume('exact', 'd');
    expect(await samples(registry, 'tokenlease_decisions_total')).toEqual([
      'tokenlease_decisions_total{policy="exact",outcome="allowed",source="store"} 4',
    ]);
  });

  it('exports the breaker state each attached limiter reports', async () => {
    const registry = new Registry();
    const observer = prometheusObserver({ registry });
    const limiter = new Limiter({ policies, sweepIntervalMs: 0, observers: [observer] });
    open.push(limiter);
    expect(await samples(registry, 'tokenlease_breaker_state'), 'every limiter has a breaker').toEqual([
      'tokenlease_breaker_state{state="closed"} 1',
      'tokenlease_breaker_state{state="open"} 0',
      'tokenlease_breaker_state{state="half-open"} 0',
    ]);
    // What a limiter with a store breaker reports through stats(); this one stands in for two more.
    const breaker = (state: 'open' | 'half-open'): ObservedLimiter => ({
      policies: [],
      stats: () => ({ ...limiter.stats(), keys: 0, breaker: state }),
      offenders: () => ({ total: 0, top: [] }),
    });
    observer.attach?.(breaker('open'));
    observer.attach?.(breaker('half-open'));
    expect(await samples(registry, 'tokenlease_breaker_state')).toEqual([
      'tokenlease_breaker_state{state="closed"} 1',
      'tokenlease_breaker_state{state="open"} 1',
      'tokenlease_breaker_state{state="half-open"} 1',
    ]);
  });

  it('rejects bad options naming the field', () => {
    expect(() => prometheusObserver({ registry: {} as Registry })).toThrow(/`registry`/);
    const registry = new Registry();
    expect(() => prometheusObserver({ registry, prefix: 'bad prefix' })).toThrow(/`prefix`/);
    expect(() => prometheusObserver({ registry, buckets: [0] })).toThrow(/`buckets`/);
    expect(() => prometheusObserver({ registry, topN: 1.5 })).toThrow(/`topN`/);
  });

  it('counts store errors and stranded tokens when Redis dies before leases are handed back', async () => {
    const server = await startRedis();
    try {
      const client = trackClient(new Redis(server.url));
      const store = new RedisStore({ client, prefix: uniquePrefix('obs'), timeoutMs: 5000 });
      await store.ready();
      const registry = new Registry();
      const limiter = new Limiter({
        store,
        policies,
        sweepIntervalMs: 0,
        observers: [prometheusObserver({ registry })],
      });
      for (let i = 0; i < 5; i++) await limiter.consume('leased', 'k');
      // Refill-ahead leases are real round trips in the background: wait until the last one landed
      // (the leased total holds still), so every held token is counted below.
      let last = -1;
      await vi.waitFor(
        () => {
          const now = limiter.stats().tokensLeased;
          const settled = now === last && now > 5;
          last = now;
          if (!settled) throw new Error(`leased ${now}, still moving`);
        },
        { timeout: 5000, interval: 100 },
      );
      const held = limiter.stats().tokensLeased - 5;
      expect(held, 'tokens held when Redis dies').toBeGreaterThan(0);
      await server.kill();
      await limiter.close();
      expect(limiter.stats().tokensStranded).toBe(held);
      expect(await samples(registry, 'tokenlease_stranded_tokens_total')).toEqual([
        `tokenlease_stranded_tokens_total{policy="leased"} ${held}`,
      ]);
      const errors = await samples(registry, 'tokenlease_store_errors_total');
      expect(errors).toHaveLength(1);
      // close() tries the hand-back again for closeTimeoutMs while Redis is down: each try counts.
      expect(errors[0]).toMatch(
        /^tokenlease_store_errors_total\{op="token_bucket_sync",code="ERR_TOKENLEASE_STORE[A-Z_]*"\} \d+$/,
      );
      expect(await samples(registry, 'tokenlease_leases_returned_total')).toEqual([
        'tokenlease_leases_returned_total{policy="leased",reason="closed"} 1',
      ]);
    } finally {
      await server.stop();
    }
  });
});
