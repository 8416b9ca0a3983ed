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
  };
  /** Distinct keys of the Zipf key set. */
  readonly zipfKeys: number;
  /** Requests in flight for contestants that talk to Redis. */
  readonly redisConcurrency: number;
  readonly cost: {
    readonly contestants: readonly string[];
    readonly ms: number;
    readonly warmMs: number;
  };
  readonly http: {
    readonly contestants: readonly string[];
    readonly rounds: number;
    readonly ms: number;
    readonly warmMs: number;
    /** Connections of the saturation load (throughput); latency is measured with one connection. */
    readonly connections: number;
    /** Distinct keys the server decides on: 1 (one hot client) or a Zipf population. */
    readonly keys: readonly number[];
  };
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
const REDIS_BACKED = ['tokenlease-redis', 'rlf-redis', 'lua'];
const HTTP = ['none', 'tokenlease-redis', 'rlf-redis', 'lua'];
const SCENARIOS: readonly Scenario[] = ['hit', 'miss', 'denied', 'multi'];

export const PROFILES: Record<Profile['name'], Profile> = {
  full: {
    name: 'full',
    rounds: 5,
    micro: { scenarios: SCENARIOS, contestants: EVERY_MICRO, roundMs: 250, warmMs: 250 },
    zipfKeys: 10_000,
    redisConcurrency: 64,
    cost: { contestants: REDIS_BACKED, ms: 3000, warmMs: 1000 },
    http: { contestants: HTTP, rounds: 5, ms: 1000, warmMs: 800, connections: 32, keys: [1, 10_000] },
    metrics: { rounds: 11, decisions: 100_000 },
    memory: { keys: [10_000, 100_000, 1_000_000], redisKeys: 10_000 },
  },
  quick: {
    name: 'quick',
    rounds: 3,
    micro: { scenarios: SCENARIOS, contestants: EVERY_MICRO, roundMs: 60, warmMs: 40 },
    zipfKeys: 10_000,
    redisConcurrency: 64,
    cost: { contestants: REDIS_BACKED, ms: 500, warmMs: 200 },
    http: { contestants: HTTP, rounds: 1, ms: 500, warmMs: 200, connections: 32, keys: [1, 10_000] },
    metrics: { rounds: 5, decisions: 20_000 },
    memory: { keys: [10_000], redisKeys: 1_000 },
  },
  smoke: {
    name: 'smoke',
    rounds: 1,
    micro: {
      scenarios: SCENARIOS,
      contestants: ['map-sync', 'map', 'tokenlease-memory', 'rlf-memory', 'tokenlease-redis'],
      roundMs: 10,
      warmMs: 5,
    },
    zipfKeys: 100,
    redisConcurrency: 8,
    cost: { contestants: ['tokenlease-redis'], ms: 100, warmMs: 50 },
    http: {
      contestants: ['none', 'tokenlease-redis'],
      rounds: 1,
      ms: 200,
      warmMs: 50,
      connections: 4,
      keys: [100],
    },
    metrics: { rounds: 1, decisions: 2_000 },
    memory: { keys: [1_000], redisKeys: 50 },
  },
};
