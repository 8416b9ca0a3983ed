import type { Meter } from '@opentelemetry/api';
import { DataPointType, MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics';
import { describe, expect, it } from 'vitest';
import { Limiter, MemoryStore, type PolicyConfig } from '../../src/index.js';
import { openTelemetryObserver } from '../../src/observe/opentelemetry.js';
import { closedAfterEach } from '../support/closedAfterEach.js';

/** A reader that exports nothing by itself: the test pulls with collect(). */
class PullReader extends MetricReader {
  protected override onForceFlush(): Promise<void> {
    return Promise.resolve();
  }
  protected override onShutdown(): Promise<void> {
    return Promise.resolve();
  }
}

const policies: Record<string, PolicyConfig> = {
  exact: { algorithm: 'token-bucket', rate: 10, burst: 10, lease: 'exact' },
};

const open = closedAfterEach();

/** Every data point as `name{attr=value,…} value` (histograms: their count), sorted. */
async function points(reader: MetricReader): Promise<string[]> {
  const { resourceMetrics } = await reader.collect();
  const out: string[] = [];
  for (const scope of resourceMetrics.scopeMetrics) {
    for (const metric of scope.metrics) {
      for (const p of metric.dataPoints) {
        const attrs = Object.entries(p.attributes)
          .map(([k, v]) => `${k}=${String(v)}`)
          .join(',');
        const value =
          metric.dataPointType === DataPointType.HISTOGRAM
            ? `count=${(p.value as { count: number }).count}`
            : String(p.value);
        out.push(`${metric.descriptor.name}{${attrs}} ${value}`);
      }
    }
  }
  return out.sort();
}

describe('openTelemetryObserver', () => {
  it('reports the same counts as the Prometheus adapter, without client keys', async () => {
    const reader = new PullReader();
    const provider = new MeterProvider({ readers: [reader] });
    const now = () => 1_000_000;
    const limiter = new Limiter({
      store: new MemoryStore({ now }),
      policies,
      now,
      sweepIntervalMs: 0,
      observers: [openTelemetryObserver({ meter: provider.getMeter('tokenlease'), topN: 2 })],
    });
    open.push(limiter);
    for (let i = 0; i < 12; i++) await limiter.consume('exact', 'secret-key-a');
    await limiter.consume('exact', 'secret-key-b', 50);
    const all = await points(reader);
    expect(all.join('\n')).not.toContain('secret-key');
    expect(all.filter((p) => !p.startsWith('tokenlease.store.duration'))).toEqual([
      'tokenlease.breaker.state{state=closed} 1',
      'tokenlease.breaker.state{state=half-open} 0',
      'tokenlease.breaker.state{state=open} 0',
      'tokenlease.decisions{policy=exact,outcome=allowed,source=store} 10',
      'tokenlease.decisions{policy=exact,outcome=denied,source=lease} 2',
      'tokenlease.decisions{policy=exact,outcome=denied,source=store} 1',
      'tokenlease.local_keys{} 2',
      'tokenlease.rate_limited{policy=exact,reason=cost-above-limit} 1',
      'tokenlease.rate_limited{policy=exact,reason=limit} 2',
      'tokenlease.store.calls{op=token_bucket_acquire} 11',
      'tokenlease.top_denied.share{policy=exact,rank=1} 0.6666666666666666',
      'tokenlease.top_denied.share{policy=exact,rank=2} 0.3333333333333333',
      'tokenlease.top_denied{policy=exact,rank=1} 2',
      'tokenlease.top_denied{policy=exact,rank=2} 1',
    ]);
    expect(all.filter((p) => p.startsWith('tokenlease.store.duration'))).toEqual([
      'tokenlease.store.duration{op=token_bucket_acquire} count=11',
    ]);
    // Cumulative: a second collection after more decisions shows the new totals.
    await limiter.consume('exact', 'secret-key-c');
    expect(await points(reader)).toContain(
      'tokenlease.decisions{policy=exact,outcome=allowed,source=store} 11',
    );
    await provider.shutdown();
  });

  it('sums the decisions of every limiter it was given, closed ones included', async () => {
    const reader = new PullReader();
    const provider = new MeterProvider({ readers: [reader] });
    const observer = openTelemetryObserver({ meter: provider.getMeter('tokenlease') });
    const make = () => new Limiter({ policies, sweepIntervalMs: 0, observers: [observer] });
    const [one, two] = [make(), make()];
    open.push(one);
    await one.consume('exact', 'a');
    await two.consume('exact', 'b');
    await two.consume('exact', 'c');
    const decisions = async () => (await points(reader)).filter((p) => p.startsWith('tokenlease.decisions{'));
    expect(await decisions()).toEqual(['tokenlease.decisions{policy=exact,outcome=allowed,source=store} 3']);
    await two.close();
    await one.consume('exact', 'd');
    expect(await decisions(), 'a closed limiter stays counted').toEqual([
      'tokenlease.decisions{policy=exact,outcome=allowed,source=store} 4',
    ]);
    await provider.shutdown();
  });

  it('rejects bad options naming the field', () => {
    expect(() => openTelemetryObserver({ meter: {} as Meter })).toThrow(/`meter`/);
    const meter = new MeterProvider().getMeter('t');
    expect(() => openTelemetryObserver({ meter, topN: -1 })).toThrow(/`topN`/);
    expect(() => openTelemetryObserver({ meter, buckets: [-1] })).toThrow(/`buckets`/);
    expect(() => openTelemetryObserver({ meter, prefx: 'edge.' } as never)).toThrow(
      /`prefx`: unknown option/,
    );
  });
});
