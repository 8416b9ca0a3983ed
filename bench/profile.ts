import type { Scenario } from './contestants.js';

/** How long and how wide a run is. `full` is what RESULTS.md reports. */
export interface Profile {
  readonly name: 'full' | 'quick' | 'smoke';
  /** Rounds per measurement; contestants take turns within each round. */
  readonly rounds: number;
  readonly micro: {
    readonly scenarios: readonly Scenario[];
    readonly contestants: readonly string[];
    readonly roundMs: number;
    readonly warmMs: number;
    /**
     * Warm-up of the cases on many keys. A limiter's first seconds on a new table are its start-up
     * (the fleet not yet counted, slow-start leases expiring, first allowances): the cases measure
     * the steady state a gateway runs in, so every contestant first runs this long.
     */
    readonly manyKeysWarmMs: number;
  };
  /** Distinct keys of the Zipf key set. */
  readonly zipfKeys: number;
  /** Requests in flight for contestants that talk to Redis. */
  readonly redisConcurrency: number;
  readonly http: {
    readonly contestants: readonly string[];
    readonly rounds: number;
    readonly ms: number;
    /**
     * Saturation load before the rounds, long enough for every contestant to reach its steady
     * state: tokenlease's first sight of each of the 10k keys is a store call, and at ~40 k req/s
     * the Zipf tail is first seen over the first 2-4 s. Reported on its own as the cold start.
     */
    readonly warmMs: number;
    /**
     * Saturation load right before each measured window, not measured: a contestant idles while
     * the others take their turns (5-10 s), longer than tokenlease keeps an idle key's state
     * (~4.6 s), so without it every window would start with the tail half cold again.
     */
    readonly rewarmMs: number;
    /** Back-to-back windows of tokenlease and the Map after each round, for the throughput target. */
    readonly pairs: number;
    readonly pairMs: number;
    /** Connections of the saturation load (throughput); latency is measured with one connection. */
    readonly connections: number;
    /** Distinct keys the server decides on: 1 (one hot client) or a Zipf population. */
    readonly keys: readonly number[];
  };
  /** Issue 11's one-instance tail and hot key (bench/tail-redis.ts). */
  readonly tail: {
    readonly concurrency: readonly number[];
    readonly hotConcurrency: number;
    readonly contestants: readonly string[];
    readonly rounds: number;
    readonly roundMs: number;
    readonly warmMs: number;
    /** Redis's idle CPU is calibrated over this long first. */
    readonly idleMs: number;
  };
  /** Issue 11's fleet: instances sharing one redis-server (bench/tail-redis.ts). */
  readonly fleet: {
    readonly instances: number;
    readonly concurrency: number;
    readonly contestants: readonly string[];
    readonly rounds: number;
    readonly roundMs: number;
    readonly warmMs: number;
    readonly idleMs: number;
  };
  /** Issue 16's one-in-flight latency (bench/latency-redis.ts). */
  readonly latency: { readonly contestants: readonly string[]; readonly ms: number; readonly warmMs: number };
  /** Issue 16's adapter CPU per request (bench/adapter.ts). */
  readonly adapter: {
    readonly frameworks: readonly string[];
    readonly rounds: number;
    readonly ms: number;
    readonly warmMs: number;
    readonly connections: number;
  };
  /** The HTTP layer's CPU in process (bench/adapter-cpu.ts): rounds, calls per side per round. */
  readonly adapterCpu: { readonly rounds: number; readonly calls: number };
  /** bench/metrics-overhead.ts: rounds and decisions per side per round. */
  readonly metrics: { readonly rounds: number; readonly decisions: number };
  readonly memory: {
    /** Tracked keys per child process measuring the local table. */
    readonly keys: readonly number[];
    /** Keys written to Redis to measure its memory per key. */
    readonly redisKeys: number;
  };
}

const EVERY_MICRO = [
  'map-sync',
  'map',
  'tokenlease-memory',
  'rlf-memory',
  'tokenlease-redis',
  'rlf-redis',
  'lua',
];
const IN_MEMORY = ['map-sync', 'map', 'tokenlease-memory', 'rlf-memory'];
const REDIS_BACKED = ['tokenlease-redis', 'rlf-redis', 'lua'];
const WITH_FLOOR = ['map', ...REDIS_BACKED];
const HTTP = ['none', 'map', 'tokenlease-redis', 'rlf-redis', 'lua'];
const SCENARIOS: readonly Scenario[] = ['hit', 'miss', 'denied', 'multi'];

export const PROFILES: Record<Profile['name'], Profile> = {
  full: {
    name: 'full',
    rounds: 5,
    micro: {
      scenarios: SCENARIOS,
      contestants: EVERY_MICRO,
      roundMs: 250,
      warmMs: 250,
      manyKeysWarmMs: 3000,
    },
    zipfKeys: 10_000,
    redisConcurrency: 64,
    tail: {
      concurrency: [1, 16, 256],
      hotConcurrency: 16,
      contestants: WITH_FLOOR,
      rounds: 5,
      roundMs: 1000,
      warmMs: 1000,
      idleMs: 1000,
    },
    fleet: {
      instances: 8,
      concurrency: 64,
      contestants: WITH_FLOOR,
      rounds: 5,
      roundMs: 1000,
      warmMs: 1000,
      idleMs: 1000,
    },
    latency: { contestants: REDIS_BACKED, ms: 5000, warmMs: 1000 },
    adapter: {
      frameworks: ['node', 'express', 'fastify'],
      rounds: 7,
      ms: 1000,
      warmMs: 1000,
      connections: 50,
    },
    http: {
      contestants: HTTP,
      rounds: 5,
      ms: 1000,
      warmMs: 5000,
      rewarmMs: 2000,
      pairs: 4,
      pairMs: 500,
      connections: 50,
      keys: [10_000],
    },
    adapterCpu: { rounds: 11, calls: 100_000 },
    metrics: { rounds: 31, decisions: 100_000 },
    memory: { keys: [10_000, 100_000, 1_000_000], redisKeys: 10_000 },
  },
  quick: {
    name: 'quick',
    rounds: 5,
    micro: {
      scenarios: ['hit', 'multi'],
      contestants: IN_MEMORY,
      roundMs: 150,
      warmMs: 100,
      manyKeysWarmMs: 3000,
    },
    zipfKeys: 10_000,
    redisConcurrency: 64,
    tail: {
      concurrency: [1, 16, 256],
      hotConcurrency: 16,
      contestants: WITH_FLOOR,
      rounds: 3,
      roundMs: 300,
      warmMs: 300,
      idleMs: 300,
    },
    fleet: {
      instances: 8,
      concurrency: 64,
      contestants: WITH_FLOOR,
      rounds: 3,
      roundMs: 500,
      warmMs: 500,
      idleMs: 300,
    },
    latency: { contestants: REDIS_BACKED, ms: 2000, warmMs: 500 },
    adapter: { frameworks: ['node', 'express', 'fastify'], rounds: 3, ms: 500, warmMs: 500, connections: 50 },
    http: {
      contestants: HTTP,
      rounds: 3,
      ms: 500,
      warmMs: 4000,
      rewarmMs: 1000,
      pairs: 2,
      pairMs: 400,
      connections: 50,
      keys: [10_000],
    },
    adapterCpu: { rounds: 9, calls: 50_000 },
    metrics: { rounds: 9, decisions: 50_000 },
    memory: { keys: [10_000], redisKeys: 1_000 },
  },
  smoke: {
    name: 'smoke',
    rounds: 1,
    micro: {
      scenarios: ['hit', 'multi'],
      contestants: ['map', 'tokenlease-memory', 'rlf-memory', 'tokenlease-redis'],
      roundMs: 10,
      warmMs: 5,
      manyKeysWarmMs: 5,
    },
    zipfKeys: 100,
    redisConcurrency: 8,
    tail: {
      concurrency: [16],
      hotConcurrency: 4,
      contestants: ['map', 'tokenlease-redis'],
      rounds: 1,
      roundMs: 50,
      warmMs: 20,
      idleMs: 20,
    },
    fleet: {
      instances: 2,
      concurrency: 8,
      contestants: ['tokenlease-redis'],
      rounds: 1,
      roundMs: 50,
      warmMs: 20,
      idleMs: 20,
    },
    latency: { contestants: ['tokenlease-redis'], ms: 50, warmMs: 20 },
    adapter: { frameworks: ['node'], rounds: 1, ms: 200, warmMs: 50, connections: 4 },
    http: {
      contestants: ['none', 'tokenlease-redis'],
      rounds: 1,
      ms: 200,
      warmMs: 50,
      rewarmMs: 0,
      pairs: 1,
      pairMs: 100,
      connections: 4,
      keys: [100],
    },
    adapterCpu: { rounds: 1, calls: 1_000 },
    metrics: { rounds: 1, decisions: 2_000 },
    memory: { keys: [1_000], redisKeys: 50 },
  },
};
