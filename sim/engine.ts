import { Limiter, type LimiterStats, MemoryStore, type Store } from '../src/index.js';
import { createBalancer } from './balancer.js';
import { VirtualClock } from './clock.js';
import {
  type CheckResult,
  type Deployment,
  exactPolicies,
  type GatewayDecision,
  type SimRequest,
  singlePolicy,
} from './deployment.js';
import { drawRoundTrip, LatencyStore, type Link, type SyncStore } from './latencyStore.js';
import { policyModel } from './policies.js';
import { exponential, stream, WeightedPicker, zipfWeights } from './random.js';
import { loadAt, meanCost, peakLoad, type Scenario } from './scenario.js';
import { type SeriesName, TimeSeries } from './series.js';
import type { LogRecord } from './traffic.js';
import { EnvelopeExcess, Gaps } from './windows.js';

/** Instances hand back expired leases this often (virtual ms), as the library's own timer would. */
export const SWEEP_EVERY_MS = 100;
/**
 * A cluster denial counts as "below the limit" when the exact reference admitted the same request
 * and still had at least this fraction of the limit left: the key was nowhere near empty.
 */
export const NEAR_EMPTY_FRACTION = 0.1;
/** Instances' LRU bound when the key count is not known up front (a replayed log). */
const REPLAY_MAX_KEYS = 100_000;

export interface RunOptions {
  /**
   * The shared store behind the modelled network, created on the run's virtual clock.
   * @default a MemoryStore on that clock
   */
  sharedStore?: (clock: VirtualClock) => SyncStore | Store;
  /** What the gateways run. @default the scenario's policy */
  deployment?: Deployment;
  /**
   * Replays these requests (times in ms, in order) instead of generating the scenario's traffic.
   * With `byInstance`, the log's instance column picks the gateway instead of the balancer.
   */
  replay?: { records: AsyncIterable<LogRecord>; byInstance: boolean };
  /** Called now and then with the fraction of virtual time done (replays: the time reached, in ms). */
  onProgress?: (fraction: number) => void;
}

export interface InstanceRecord {
  id: number;
  /** The log's instance name, when it picked the instance. */
  name: string | null;
  joinedMs: number;
  leftMs: number | null;
  leave: 'close' | 'crash' | null;
  decisions: number;
  admittedTokens: number;
  stats: LimiterStats;
}

/** One limiter check's key (policy and key): the unit every bound holds for. */
export interface CheckRecord {
  policy: string;
  clusterTokens: number;
  exactTokens: number;
  deniedBelowLimit: number;
  envelope: EnvelopeExcess | undefined;
  gaps: Gaps;
}

/** One client key: the unit drift per key class is reported for. */
export interface ClientRecord {
  requests: number;
  offeredTokens: number;
  clusterTokens: number;
  exactTokens: number;
  deniedBelowLimit: number;
}

/** Everything a run observed; `report.ts` turns it into numbers. O(keys) memory, not O(requests). */
export interface RunRecord {
  scenario: Scenario;
  deployment: Deployment;
  /** Virtual time the traffic spanned (a replay's: first to last request). */
  durationMs: number;
  bucketMs: number;
  buckets: Record<SeriesName, number[]>;
  checks: Map<string, CheckRecord>;
  clients: Map<string, ClientRecord>;
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
  /** Store calls with the calls of one instance at one instant counted once (a batching store). */
  roundTrips: number;
  referenceStoreCalls: number;
  peakInstances: number;
  instances: InstanceRecord[];
}

interface Instance {
  record: Omit<InstanceRecord, 'stats'>;
  limiter: Limiter;
  link: Link;
  gateway: (req: SimRequest) => Promise<GatewayDecision>;
}

/**
 * Runs one scenario in virtual time: N gateway instances, each a real `Limiter` behind the
 * deployment's rules, sharing one store through modelled latency, and the same request stream
 * through the exact reference: the same deployment with every policy in exact mode on its own
 * zero-latency store.
 */
export async function simulate(scenario: Scenario, options: RunOptions = {}): Promise<RunRecord> {
  const deployment = options.deployment ?? singlePolicy(scenario.policy);
  const replay = options.replay;
  const clock = new VirtualClock();
  const random = (label: string) => stream(scenario.seed, label);
  const retryRandom = random('retry');
  const scaleRandom = random('scale');
  const referenceLatency = random('reference-latency');
  const series = new TimeSeries(replay ? undefined : scenario.durationMs);

  const shared = new LatencyStore(
    options.sharedStore?.(clock) ?? new MemoryStore({ now: clock.now }),
    clock,
    scenario.latency,
    random('latency'),
    () => series.add('storeCalls', clock.now(), 1),
  );
  // No eviction ever (every key fits), and no preallocating the library's default 100 000 slots
  // for each of dozens of limiters.
  const maxKeys = replay ? REPLAY_MAX_KEYS : scenario.traffic.keys.count;
  const referenceStore = new MemoryStore({ now: clock.now });
  let referenceStoreCalls = 0;
  const referenceLimiter = new Limiter({
    store: {
      run: (op, key, req) => {
        referenceStoreCalls++;
        return referenceStore.run(op, key, req);
      },
      close: () => referenceStore.close(),
    },
    policies: exactPolicies(deployment),
    now: clock.now,
    sweepIntervalMs: 0,
    maxKeys,
  });
  const reference = deployment.gateway(referenceLimiter);

  const record: RunRecord = {
    scenario,
    deployment,
    durationMs: replay ? 0 : scenario.durationMs,
    bucketMs: 0,
    buckets: series.values,
    checks: new Map(),
    clients: new Map(),
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
    roundTrips: 0,
    referenceStoreCalls: 0,
    peakInstances: 0,
    instances: [],
  };

  // --- Instances and the balancer -------------------------------------------------------------
  const all: Instance[] = [];
  const live: Instance[] = [];
  const byId = new Map<number, Instance>();
  const byName = new Map<string, Instance>();
  const closing: Promise<void>[] = [];
  const balancer = createBalancer(scenario.balancer, random('balancer'));
  const join = (name: string | null): Instance => {
    const link = shared.link();
    const limiter = new Limiter({
      store: link,
      policies: deployment.policies,
      now: clock.now,
      sweepIntervalMs: 0,
      maxKeys,
    });
    const instance: Instance = {
      record: {
        id: all.length,
        name,
        joinedMs: clock.now(),
        leftMs: null,
        leave: null,
        decisions: 0,
        admittedTokens: 0,
      },
      limiter,
      link,
      gateway: deployment.gateway(limiter),
    };
    all.push(instance);
    live.push(instance);
    byId.set(instance.record.id, instance);
    record.peakInstances = Math.max(record.peakInstances, live.length);
    return instance;
  };
  const scaleTo = (count: number, leave: 'close' | 'crash') => {
    while (live.length < count) join(null);
    while (live.length > count) {
      const [gone] = live.splice(Math.floor(scaleRandom() * live.length), 1);
      gone!.record.leftMs = clock.now();
      gone!.record.leave = leave;
      // A crashed instance is simply never called again: its leases are lost with it.
      if (leave === 'close') closing.push(gone!.limiter.close());
    }
    balancer.members(live.map((i) => i.record.id));
  };
  const byInstance = replay?.byInstance ?? false;
  if (!byInstance) {
    scaleTo(scenario.instances, 'close');
    for (const event of scenario.autoscale) clock.at(event.atMs, () => scaleTo(event.instances, event.leave));
  }
  const pickInstance = (req: SimRequest): Instance => {
    if (!byInstance) return byId.get(balancer.pick(req.key))!;
    const name = req.instance ?? '';
    let instance = byName.get(name);
    if (!instance) {
      instance = join(name);
      byName.set(name, instance);
    }
    return instance;
  };

  // --- Per-key records -----------------------------------------------------------------------
  const checkRecord = (c: CheckResult): CheckRecord => {
    const id = `${c.policy}\u0000${c.key}`;
    let r = record.checks.get(id);
    if (!r) {
      const e = deployment.models.get(c.policy)?.envelope;
      r = {
        policy: c.policy,
        clusterTokens: 0,
        exactTokens: 0,
        deniedBelowLimit: 0,
        envelope: e && new EnvelopeExcess(e.capacity, e.ratePerMs),
        gaps: new Gaps(),
      };
      record.checks.set(id, r);
    }
    return r;
  };
  const clientRecord = (key: string): ClientRecord => {
    let r = record.clients.get(key);
    if (!r) {
      r = { requests: 0, offeredTokens: 0, clusterTokens: 0, exactTokens: 0, deniedBelowLimit: 0 };
      record.clients.set(key, r);
    }
    return r;
  };

  // --- Requests ------------------------------------------------------------------------------
  let lastArrival = 0;
  const issue = (req: SimRequest) => {
    const now = clock.now();
    record.requests++;
    if (req.attempt > 0) record.retries++;
    record.offeredTokens += req.cost;
    series.add('offered', now, req.cost);
    const client = clientRecord(req.key);
    client.requests++;
    client.offeredTokens += req.cost;
    const instance = pickInstance(req);
    instance.record.decisions++;
    // The exact reference decides when the fleet does: when the request's call reaches the store
    // (half the round trip of the batch the instance sends at this instant), or as soon as the
    // instance answers from local state (a lease, a remembered denial). Both then read the time at
    // the same point: decided at the request instead, a request just before a window boundary
    // could count in one window for the reference and in the next for an exact fleet.
    const cluster = instance.gateway(req);
    const decided = new Promise<GatewayDecision>((resolve, reject) => {
      let asked = false;
      const decide = () => {
        if (asked) return;
        asked = true;
        reference(req).then(resolve, reject);
      };
      cluster.then(
        (d) => d.local && decide(),
        () => {},
      );
      const sent = instance.link.batchRoundTripMs();
      if (sent !== undefined) clock.after(sent / 2, decide);
      // A local answer comes within this instant. A request still undecided at its end (waiting on
      // a lease in flight) is decided when its call would arrive: in this instant's batch if the
      // instance sent one, else after a round trip drawn from a stream of its own, so the fleet's
      // latencies stay as they were.
      else
        clock.after(0, () => {
          if (asked) return;
          const rtt = instance.link.batchRoundTripMs() ?? drawRoundTrip(scenario.latency, referenceLatency);
          clock.after(rtt / 2, decide);
        });
    });
    const exact = decided.then((d) => {
      if (d.allowed) {
        const t = clock.now();
        record.exactRequests++;
        record.exactTokens += req.cost;
        client.exactTokens += req.cost;
        series.add('exact', t, req.cost);
        for (const c of d.checks) {
          const r = checkRecord(c);
          r.exactTokens += c.cost;
          r.gaps.exact(t, c.cost);
        }
      }
      return d;
    });
    // The client hears the cluster's answer and retries on it alone, so the moment the reference
    // decides at moves no request of the stream.
    cluster.then(
      (c) => onCluster(req, client, instance, c),
      () => {
        record.failed++;
      },
    );
    Promise.all([exact, cluster]).then(
      ([e, c]) => {
        if (c.allowed || !e.allowed) return;
        if (e.checks.every((x) => x.remaining >= NEAR_EMPTY_FRACTION * x.limit)) {
          record.deniedBelowLimit++;
          client.deniedBelowLimit++;
          for (const x of e.checks) checkRecord(x).deniedBelowLimit++;
        }
      },
      () => {},
    );
  };

  const onCluster = (req: SimRequest, client: ClientRecord, instance: Instance, cluster: GatewayDecision) => {
    const now = clock.now();
    if (cluster.allowed) {
      record.admittedRequests++;
      record.admittedTokens += req.cost;
      client.clusterTokens += req.cost;
      instance.record.admittedTokens += req.cost;
      series.add('admitted', now, req.cost);
      for (const c of cluster.checks) {
        const r = checkRecord(c);
        r.clusterTokens += c.cost;
        r.gaps.cluster(now, c.cost);
        r.envelope?.add(now, c.cost);
      }
      return;
    }
    const retry = replay ? undefined : scenario.traffic.retry;
    if (!retry || req.attempt >= retry.maxRetries) return;
    let delay: number;
    if (retry.honourRetryAfter) {
      if (!Number.isFinite(cluster.retryAfterMs)) return;
      delay = cluster.retryAfterMs + retryRandom() * retry.backoffMs;
    } else {
      delay = retry.backoffMs * (0.5 + retryRandom());
    }
    if (now + delay < scenario.durationMs)
      clock.after(delay, () => issue({ ...req, attempt: req.attempt + 1 }));
  };

  let end: number;
  if (replay) {
    // One record read ahead at a time: the log streams, whatever its length.
    const records = replay.records[Symbol.asyncIterator]();
    let origin: number | undefined;
    let finished = false;
    const next = async (): Promise<void> => {
      const r = await records.next();
      if (r.done) {
        finished = true;
        record.durationMs = lastArrival;
        clock.at(lastArrival + 1, shutdown);
        return;
      }
      origin ??= r.value.timeMs;
      const t = Math.max(lastArrival, r.value.timeMs - origin);
      lastArrival = t;
      const { timeMs: _, ...req } = r.value;
      clock.at(t, () => {
        issue({ ...req, attempt: 0 });
        return next();
      });
    };
    await next();
    end = Number.POSITIVE_INFINITY;
    const sweep = (t: number) =>
      clock.at(t, () => {
        sweepAll();
        if (!finished || clock.now() < lastArrival) sweep(t + SWEEP_EVERY_MS);
      });
    sweep(SWEEP_EVERY_MS);
  } else {
    generate(scenario, clock, random, issue);
    for (let t = SWEEP_EVERY_MS; t < scenario.durationMs; t += SWEEP_EVERY_MS) clock.at(t, sweepAll);
    // The last decisions settle, then the remaining instances shut down cleanly.
    clock.at(scenario.durationMs + 1, shutdown);
    end = scenario.durationMs + 60_000;
  }

  function sweepAll() {
    for (const instance of live) instance.limiter.sweep();
    referenceLimiter.sweep();
    series.add('instances', clock.now(), live.length);
  }
  function shutdown() {
    series.add('instances', clock.now() - 1, live.length);
    for (const instance of live.splice(0)) closing.push(instance.limiter.close());
  }

  const progress =
    options.onProgress &&
    ((now: number) => options.onProgress!(replay ? now : Math.min(1, now / scenario.durationMs)));
  await clock.run(end, progress);
  await Promise.all(closing);
  await referenceLimiter.close();

  record.bucketMs = series.bucketMs;
  record.buckets = series.dense();
  record.storeCalls = shared.calls.count;
  record.roundTrips = shared.calls.roundTrips;
  record.referenceStoreCalls = referenceStoreCalls;
  record.instances = all.map((i) => ({ ...i.record, stats: i.limiter.stats() }));
  return record;
}

/**
 * The scenario's own traffic: Poisson arrivals with a time-varying rate, by thinning (candidates
 * at the peak rate, each kept with probability load(t) / peak), keys by Zipf popularity.
 */
function generate(
  scenario: Scenario,
  clock: VirtualClock,
  random: (label: string) => () => number,
  issue: (req: SimRequest) => void,
): void {
  const { traffic, durationMs } = scenario;
  const arrivalRandom = random('arrivals');
  const keyRandom = random('keys');
  const costRandom = random('costs');
  const keyNames = Array.from({ length: traffic.keys.count }, (_, i) => `key-${i}`);
  const keyPicker = new WeightedPicker(zipfWeights(traffic.keys.count, traffic.keys.zipf));
  const costPicker = new WeightedPicker(traffic.costs.map((c) => c.weight));
  const peak = peakLoad(traffic.demand);
  const peakPerMs = (peak * policyModel(scenario.policy).ratePerMs) / meanCost(traffic);
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
}
