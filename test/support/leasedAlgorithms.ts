/**
 * The leased algorithms with write-behind allowances (token bucket, fixed window, sliding window),
 * described once for the fault tests that run the same faults over all three
 * (test/redis/writeBehindFaults.test.ts, writeBehindRestart.test.ts,
 * test/cluster/writeBehindFailover.test.ts): the policy a test runs, how much its state in Redis
 * has charged, and the bounds docs/architecture.md "Guarantees" states for it.
 */
import type { Cluster, Redis } from 'ioredis';
import { windowIndex } from '../../src/algorithms/fixedWindow.js';
import type { PolicyConfig } from '../../src/index.js';
import { storageKey } from '../../src/stores/keys.js';
import { storedLevel } from './bucketState.js';
import type { Target } from './ledgerFleet.js';

type Algorithm = 'token-bucket' | 'fixed-window' | 'sliding-window';

export interface PolicyShape {
  /** A bucket's burst, a window's limit. */
  readonly capacity: number;
  /** A bucket's refill per second (a window ignores it). */
  readonly perSecond: number;
  /** A window's length (a bucket ignores it); `charged` and `windowClock` need the default. */
  readonly window?: '1s' | '1h';
  readonly leaseTtl?: '300ms' | '500ms';
  readonly fail?: 'closed';
}

export interface LeasedAlgorithm {
  readonly name: string;
  readonly algorithm: Algorithm;
  /** The store operation that carries usage reports. */
  readonly syncScript: string;
  /** Whether an instance admits a key's first request before the store answered (a bucket's first sight). */
  readonly firstSight: boolean;
  policy(shape: PolicyShape): PolicyConfig;
  /** What an exact limiter admits over `elapsedMs` from a full bucket or a fresh window. */
  exact(shape: PolicyShape, elapsedMs: number): number;
  /**
   * Most a fleet of `n` instances admits beyond the exact limiter through allowances, with nothing
   * lost: half a bucket's burst; `(n - 1) · floor(limit / (4 · fleet))` for a window.
   */
  outstanding(capacity: number, n: number, fleet: number): number;
  /** One allowance, the most a crash or a lost report can take: `floor(burst / (2 · fleet))`, `floor(limit / (4 · fleet))`. */
  share(capacity: number, fleet: number): number;
  /** Tokens the state at `redisKey` has charged: taken off a bucket's level, counted in the window of `now`. */
  charged(client: Redis | Cluster, redisKey: string, capacity: number, now: number): Promise<number>;
}

/** Window length of the window policies: no window ends while a test runs on `windowClock()`. */
const WINDOW_MS = 3_600_000;

const tokenBucket: LeasedAlgorithm = {
  name: 'token bucket',
  algorithm: 'token-bucket',
  syncScript: 'token_bucket_sync',
  firstSight: true,
  policy: ({ capacity, perSecond, leaseTtl, fail }) => ({
    algorithm: 'token-bucket',
    rate: perSecond,
    period: '1s',
    burst: capacity,
    ...(leaseTtl ? { lease: { ttl: leaseTtl } } : {}),
    ...(fail ? { fail } : {}),
  }),
  exact: ({ capacity, perSecond }, elapsedMs) => capacity + (perSecond * elapsedMs) / 1000,
  outstanding: (capacity) => capacity / 2,
  share: (capacity, fleet) => Math.floor(capacity / (2 * fleet)),
  charged: async (client, redisKey, capacity) => capacity - (await storedLevel(client, redisKey, capacity)),
};

function windowAlgorithm(
  name: string,
  algorithm: 'fixed-window' | 'sliding-window',
  countField: string,
): LeasedAlgorithm {
  return {
    name,
    algorithm,
    syncScript: `${algorithm.replace('-', '_')}_sync`,
    // Usage names its window, which only the store's first reply tells.
    firstSight: false,
    policy: ({ capacity, window = '1h', leaseTtl, fail }) => ({
      algorithm,
      limit: capacity,
      window,
      ...(leaseTtl ? { lease: { ttl: leaseTtl } } : {}),
      ...(fail ? { fail } : {}),
    }),
    exact: ({ capacity }) => capacity,
    outstanding: (capacity, n, fleet) => (n - 1) * Math.floor(capacity / (4 * fleet)),
    share: (capacity, fleet) => Math.floor(capacity / (4 * fleet)),
    async charged(client, redisKey, _capacity, now) {
      const [window, count] = await client.hmget(redisKey, 'w', countField);
      return window !== null && Number(window) === windowIndex(now, WINDOW_MS) ? Number(count) : 0;
    },
  };
}

export const LEASED_ALGORITHMS: readonly LeasedAlgorithm[] = [
  tokenBucket,
  windowAlgorithm('fixed window', 'fixed-window', 'n'),
  windowAlgorithm('sliding window', 'sliding-window', 'c'),
];

/** One policy per algorithm, named after it, all of one shape. */
export function policiesOf(shape: PolicyShape): Record<string, PolicyConfig> {
  return Object.fromEntries(LEASED_ALGORITHMS.map((a) => [a.algorithm, a.policy(shape)]));
}

/** The algorithm of a target of `policiesOf`. */
export function algorithmOf(target: Target): LeasedAlgorithm {
  const algorithm = LEASED_ALGORITHMS.find((a) => a.algorithm === target.policy);
  if (algorithm === undefined) throw new Error(`no leased algorithm is named ${target.policy}`);
  return algorithm;
}

/** The key (before the store's prefix) of a target of `policiesOf`. */
export const storageKeyOf = (t: Target): string => storageKey(t.policy, t.policy, t.key);

/** A virtual time a second into a window of the window policies. */
export const WINDOW_START = 500 * WINDOW_MS + 1000;

/**
 * A clock for limiters and stores (RedisStore `now`) that runs with the wall clock from
 * `WINDOW_START`, so that no window ends while a test runs: every call of the test counts in one
 * window, and what the calls explain (`callsCharge`) is that window's count.
 */
export function windowClock(): () => number {
  const startedAt = Date.now();
  return () => WINDOW_START + (Date.now() - startedAt);
}
