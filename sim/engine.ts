import { type Decision, Limiter, type LimiterStats, MemoryStore, type Store } from '../src/index.js';
import { createBalancer } from './balancer.js';
import { VirtualClock } from './clock.js';
import { LatencyStore, type SyncStore } from './latencyStore.js';
import { policyModel } from './policies.js';
import { exponential, stream, WeightedPicker, zipfWeights } from './random.js';
import { loadAt, meanCost, peakLoad, type Scenario } from './scenario.js';
import { type Admissions, emptyAdmissions } from './windows.js';

/** The policy's name inside every simulated limiter (it shows up in store keys). */
export const POLICY = 'sim';
/** Instances hand back expired leases this often (virtual ms), as the library's own timer would. */
export const SWEEP_EVERY_MS = 100;
/**
 * A cluster denial counts as "below the limit" when the exact reference admitted the same request
 * and still had at least this fraction of the limit left: the key was nowhere near empty.
 */
export const NEAR_EMPTY_FRACTION = 0.1;

export interface RunOptions {
  /**
   * The shared store behind the modelled network, created on the run's virtual clock.
   * @default a MemoryStore on that clock
   */
  sharedStore?: (clock: VirtualClock) => SyncStore | Store;
  /** Called now and then with the fraction of virtual time done. */
  onProgress?: (fraction: number) => void;
}

export interface InstanceRecord {
  id: number;
  joinedMs: number;
  leftMs: number | null;
  leave: 'close' | 'crash' | null;
  decisions: number;
  admittedTokens: number;
  stats: LimiterStats;
}

/** Everything a run observed; `report.ts` turns it into numbers. */
export interface RunRecord {
  scenario: Scenario;
  bucketMs: number;
  buckets: {
    offered: number[];
    admitted: number[];
    exact: number[];
    storeCalls: number[];
    instances: number[];
  };
  /**
   * Per key: tokens admitted by the cluster (at decision time) and by the exact reference, and the
   * key's denials below the limit (the bounds the report checks hold per key).
   */
  keys: Map<string, KeyRecord>;
  requests: number;
  retries: number;
  failed: number;
  admittedRequests: number;
  exactRequests: number;
  offeredTokens: number;
  admittedTokens: number;
  exactTokens: number;
  deniedBelowLimit: number;
  storeCalls: number;
  referenceStoreCalls: number;
  peakInstances: number;
  instances: InstanceRecord[];
}

export interface KeyRecord {
  cluster: Admissions;
  exact: Admissions;
  deniedBelowLimit: number;
}

interface Request {
  key: string;
  cost: number;
  attempt: number;
}

interface Instance {
  record: Omit<InstanceRecord, 'stats'>;
  limiter: Limiter;
}

/** A bucket width giving about 120 points per plot, rounded to a readable value. */
function bucketWidth(durationMs: number): number {
  const raw = durationMs / 120;
  const steps = [
    100, 250, 500, 1000, 2000, 5000, 10_000, 15_000, 30_000, 60_000, 300_000, 600_000, 3_600_000,
  ];
  return steps.find((s) => s >= raw) ?? raw;
}

/**
 * Runs one scenario in virtual time: N real `Limiter`s sharing one store through modelled latency,
 * and the same request stream through the exact reference, a `Limiter` of the same policy in exact
 * mode on its own zero-latency store.
 */
export async function simulate(scenario: Scenario, options: RunOptions = {}): Promise<RunRecord> {
  const model = policyModel(scenario.policy);
  const clock = new VirtualClock();
  const random = (label: string) => stream(scenario.seed, label);
  const arrivalRandom = random('arrivals');
  const keyRandom = random('keys');
  const costRandom = random('costs');
  const retryRandom = random('retry');
  const scaleRandom = random('scale');

  const shared = new LatencyStore(
    options.sharedStore?.(clock) ?? new MemoryStore({ now: clock.now }),
    clock,
    scenario.latency,
    random('latency'),
  );
  // No eviction ever (every key fits), and no preallocating the library's default 100 000 slots
  // for each of dozens of limiters.
  const maxKeys = scenario.traffic.keys.count;
  const referenceStore = new MemoryStore({ now: clock.now });
  let referenceStoreCalls = 0;
  const reference = new Limiter({
    store: {
      run: (op, key, req) => {
        referenceStoreCalls++;
        return referenceStore.run(op, key, req);
      },
      close: () => referenceStore.close(),
    },
    policies: { [POLICY]: model.exact },
    now: clock.now,
    sweepIntervalMs: 0,
    maxKeys,
  });

  const { durationMs, traffic } = scenario;
  const bucketMs = bucketWidth(durationMs);
  const bucketCount = Math.ceil(durationMs / bucketMs);
  const series = () => new Array<number>(bucketCount).fill(0);
  const buckets = {
    offered: series(),
    admitted: series(),
    exact: series(),
    storeCalls: series(),
    instances: series(),
  };
  const bucketOf = (t: number) => Math.min(bucketCount - 1, Math.floor(t / bucketMs));

  const record: RunRecord = {
    scenario,
    bucketMs,
    buckets,
    keys: new Map(),
    requests: 0,
    retries: 0,
    failed: 0,
    admittedRequests: 0,
    exactRequests: 0,
    offeredTokens: 0,
    admittedTokens: 0,
    exactTokens: 0,
    deniedBelowLimit: 0,
    storeCalls: 0,
    referenceStoreCalls: 0,
    peakInstances: 0,
    instances: [],
  };

  // --- Instances and the balancer -------------------------------------------------------------
  const all: Instance[] = [];
  const live: Instance[] = [];
  const byId = new Map<number, Instance>();
  const closing: Promise<void>[] = [];
  const balancer = createBalancer(scenario.balancer, random('balancer'));
  const scaleTo = (count: number, leave: 'close' | 'crash') => {
    while (live.length < count) {
      const instance: Instance = {
        record: {
          id: all.length,
          joinedMs: clock.now(),
          leftMs: null,
          leave: null,
          decisions: 0,
          admittedTokens: 0,
        },
        limiter: new Limiter({
          store: shared,
          policies: { [POLICY]: scenario.policy },
          now: clock.now,
          sweepIntervalMs: 0,
          maxKeys,
        }),
      };
      all.push(instance);
      live.push(instance);
      byId.set(instance.record.id, instance);
    }
    while (live.length > count) {
      const [gone] = live.splice(Math.floor(scaleRandom() * live.length), 1);
      gone!.record.leftMs = clock.now();
      gone!.record.leave = leave;
      // A crashed instance is simply never called again: its leases are lost with it.
      if (leave === 'close') closing.push(gone!.limiter.close());
    }
    record.peakInstances = Math.max(record.peakInstances, live.length);
    balancer.members(live.map((i) => i.record.id));
  };
  scaleTo(scenario.instances, 'close');
  for (const event of scenario.autoscale) clock.at(event.atMs, () => scaleTo(event.instances, event.leave));

  // --- Requests ------------------------------------------------------------------------------
  const keyNames = Array.from({ length: traffic.keys.count }, (_, i) => `key-${i}`);
  const keyPicker = new WeightedPicker(zipfWeights(traffic.keys.count, traffic.keys.zipf));
  const costPicker = new WeightedPicker(traffic.costs.map((c) => c.weight));
  const keyRecord = (key: string) => {
    let r = record.keys.get(key);
    if (!r) {
      r = { cluster: emptyAdmissions(), exact: emptyAdmissions(), deniedBelowLimit: 0 };
      record.keys.set(key, r);
    }
    return r;
  };

  const issue = (req: Request) => {
    const now = clock.now();
    record.requests++;
    if (req.attempt > 0) record.retries++;
    record.offeredTokens += req.cost;
    buckets.offered[bucketOf(now)]! += req.cost;
    const admissions = keyRecord(req.key);
    const exact = reference.consume(POLICY, req.key, req.cost).then((d) => {
      if (d.allowed) {
        record.exactRequests++;
        record.exactTokens += req.cost;
        buckets.exact[bucketOf(clock.now())]! += req.cost;
        admissions.exact.times.push(clock.now());
        admissions.exact.costs.push(req.cost);
      }
      return d;
    });
    const instance = byId.get(balancer.pick(req.key))!;
    instance.record.decisions++;
    const cluster = instance.limiter.consume(POLICY, req.key, req.cost);
    Promise.all([exact, cluster]).then(
      ([e, c]) => onDecision(req, instance, e, c),
      () => {
        record.failed++;
      },
    );
  };

  const onDecision = (req: Request, instance: Instance, exact: Decision, cluster: Decision) => {
    const now = clock.now();
    if (cluster.allowed) {
      record.admittedRequests++;
      record.admittedTokens += req.cost;
      instance.record.admittedTokens += req.cost;
      buckets.admitted[bucketOf(now)]! += req.cost;
      const { cluster: admitted } = keyRecord(req.key);
      admitted.times.push(now);
      admitted.costs.push(req.cost);
      return;
    }
    if (exact.allowed && exact.remaining >= NEAR_EMPTY_FRACTION * exact.limit) {
      record.deniedBelowLimit++;
      keyRecord(req.key).deniedBelowLimit++;
    }
    const retry = traffic.retry;
    if (!retry || req.attempt >= retry.maxRetries) return;
    let delay: number;
    if (retry.honourRetryAfter) {
      if (!Number.isFinite(cluster.retryAfterMs)) return;
      delay = cluster.retryAfterMs + retryRandom() * retry.backoffMs;
    } else {
      delay = retry.backoffMs * (0.5 + retryRandom());
    }
    if (now + delay < durationMs) clock.after(delay, () => issue({ ...req, attempt: req.attempt + 1 }));
  };

  // Poisson arrivals with a time-varying rate, by thinning: candidates at the peak rate, each kept
  // with probability load(t) / peak.
  const peak = peakLoad(traffic.demand);
  const peakPerMs = (peak * model.ratePerMs) / meanCost(traffic);
  const arrive = (t: number) => {
    if (t >= durationMs) return;
    clock.at(t, () => {
      if (arrivalRandom() * peak < loadAt(traffic.demand, t)) {
        issue({
          key: keyNames[keyPicker.pick(keyRandom)]!,
          cost: traffic.costs[costPicker.pick(costRandom)]!.cost,
          attempt: 0,
        });
      }
      arrive(t + exponential(arrivalRandom, peakPerMs));
    });
  };
  arrive(exponential(arrivalRandom, peakPerMs));

  // --- Housekeeping ----------------------------------------------------------------------------
  for (let t = SWEEP_EVERY_MS; t < durationMs; t += SWEEP_EVERY_MS) {
    clock.at(t, () => {
      for (const instance of live) instance.limiter.sweep();
      reference.sweep();
    });
  }
  let callsSeen = 0;
  for (let b = 0; b < bucketCount; b++) {
    clock.at(Math.min(durationMs, (b + 1) * bucketMs), () => {
      buckets.storeCalls[b] = shared.calls.count - callsSeen;
      callsSeen = shared.calls.count;
      buckets.instances[b] = live.length;
    });
  }
  // The last decisions settle, then the remaining instances shut down cleanly.
  clock.at(durationMs + 1, () => {
    for (const instance of live.splice(0)) closing.push(instance.limiter.close());
  });

  const end = durationMs + 60_000;
  await clock.run(end, options.onProgress && ((now) => options.onProgress!(Math.min(1, now / durationMs))));
  await Promise.all(closing);
  await reference.close();

  record.storeCalls = shared.calls.count;
  record.referenceStoreCalls = referenceStoreCalls;
  record.instances = all.map((i) => ({ ...i.record, stats: i.limiter.stats() }));
  return record;
}
