import { readFileSync } from 'node:fs';
import type { Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterUnion } from 'rate-limiter-flexible';
import { connect, disconnect, writesOf } from './redis.js';
import { Limiter, MemoryStore, type PolicyConfig, RedisStore } from './tokenlease.js';

/**
 * What is being decided:
 * - `hit`: limits far above the offered load; for tokenlease, a decision served from a lease.
 * - `miss`: tokenlease goes to the store for every decision (`lease: 'exact'`, lease = cost);
 *   contestants without leases do exactly what they do on a hit.
 * - `denied`: every key is already over its limit (the warm-up spent it).
 * - `per-key-100`: 100 requests/s with a burst of 100 per key (issue 11's fleet case): the hot keys
 *   of a Zipf stream go over, the tail stays far below.
 * - `multi`: two rules per request (a per-second rule and a daily quota), all must pass.
 *   tokenlease and rate-limiter-flexible count the quota in a fixed window; the per-request script and
 *   the Map floor only have token buckets, so theirs is a bucket refilling once a day.
 */
export type Scenario = 'hit' | 'miss' | 'denied' | 'multi' | 'per-key-100';

export interface Limit {
  /** Tokens (points) per period. */
  readonly rate: number;
  readonly periodS: number;
  readonly burst: number;
}

/** Never refuses at any rate a benchmark reaches (issue 11: rate 1e9/s, burst 1e12). */
export const OPEN: Limit = { rate: 1e9, periodS: 1, burst: 1e12 };
/** Issue 11's fleet limit: 100/s, burst 100 per key. */
const PER_KEY_100: Limit = { rate: 100, periodS: 1, burst: 100 };
/** One request per day: the warm-up spends it, everything measured is refused. */
const CLOSED: Limit = { rate: 1, periodS: 86_400, burst: 1 };
/** The second rule of `multi`: a daily quota, never reached either. */
const DAILY: Limit = { rate: 1e10, periodS: 86_400, burst: 1e10 };

function mainLimit(scenario: Scenario): Limit {
  if (scenario === 'denied') return CLOSED;
  return scenario === 'per-key-100' ? PER_KEY_100 : OPEN;
}

/** What a decider answers: tokenlease's `Decision` is one, so its promise is handed on untouched. */
export interface Verdict {
  readonly allowed: boolean;
}
export const ALLOW: Verdict = { allowed: true };
export const DENY: Verdict = { allowed: false };

export interface Decider {
  /**
   * Decides for `key`. tokenlease's decider is `limiter.consume` itself (no wrapper adding a
   * promise), the Map floor answers synchronously and the driver awaits it like everyone else.
   */
  decide(key: string): Verdict | Promise<Verdict>;
  /** tokenlease's own counters, for store calls per decision and local answers. */
  counters?(): Counters;
  /** Requests written to Redis by this decider's connections (a pipeline counts once). */
  roundTrips?(): number;
  close(): Promise<void>;
}

export interface Counters {
  readonly storeCalls: number;
  readonly localDecisions: number;
  readonly decisions: number;
}

/**
 * "0.0012 store calls/decision, 99.9% local" between two counter readings. tokenlease counts each
 * rule of a multi-rule check as a decision, hence `per`.
 */
export function describeCounters(before: Counters, after: Counters, per = 'decision'): string {
  const decisions = after.decisions - before.decisions;
  if (decisions <= 0) return '';
  const calls = (after.storeCalls - before.storeCalls) / decisions;
  const local = (100 * (after.localDecisions - before.localDecisions)) / decisions;
  return `${calls.toPrecision(2)} store calls/${per}, ${local.toFixed(1)}% local`;
}

export interface ContestantEnv {
  readonly redisUrl: string;
  /** Namespace for every Redis key this contestant writes. */
  readonly prefix: string;
}

export interface Contestant {
  readonly id: string;
  readonly label: string;
  /** Uses Redis: driven with many requests in flight so round trips overlap. */
  readonly redis: boolean;
  /** A plain function the driver may call in a synchronous loop, without `await`. */
  readonly sync?: boolean;
  create(scenario: Scenario, env: ContestantEnv): Promise<Decider>;
}

/** The floor: a token bucket per key in a `Map`, nothing else. */
export class MapBuckets {
  readonly #buckets = new Map<string, { tokens: number; ts: number }>();
  readonly #perMs: number;
  readonly #burst: number;

  constructor(limit: Limit) {
    this.#perMs = limit.rate / (limit.periodS * 1000);
    this.#burst = limit.burst;
  }

  /** Refills and returns the bucket of `key`. */
  level(key: string, now: number): { tokens: number; ts: number } {
    let b = this.#buckets.get(key);
    if (b === undefined) {
      b = { tokens: this.#burst, ts: now };
      this.#buckets.set(key, b);
    }
    b.tokens = Math.min(this.#burst, b.tokens + (now - b.ts) * this.#perMs);
    b.ts = now;
    return b;
  }
}

function mapDecider(scenario: Scenario): Decider {
  const main = new MapBuckets(mainLimit(scenario));
  if (scenario === 'multi') {
    const daily = new MapBuckets(DAILY);
    return {
      decide(key) {
        const now = Date.now();
        const a = main.level(key, now);
        const b = daily.level(key, now);
        if (a.tokens < 1 || b.tokens < 1) return DENY;
        a.tokens -= 1;
        b.tokens -= 1;
        return ALLOW;
      },
      close: async () => {},
    };
  }
  return {
    decide(key) {
      const b = main.level(key, Date.now());
      if (b.tokens < 1) return DENY;
      b.tokens -= 1;
      return ALLOW;
    },
    close: async () => {},
  };
}

function policy(limit: Limit, exact = false): PolicyConfig {
  return {
    algorithm: 'token-bucket',
    rate: limit.rate,
    period: limit.periodS * 1000,
    burst: limit.burst,
    ...(exact ? { lease: 'exact' as const } : {}),
  };
}

function tokenleaseDecider(
  limiter: Limiter,
  scenario: Scenario,
  close: () => Promise<void>,
  client?: Redis,
): Decider {
  // `consume`'s own promise goes to the driver: no async wrapper adding a promise per decision.
  const decide =
    scenario === 'multi'
      ? (key: string) =>
          limiter.consume([
            { policy: 'main', key },
            { policy: 'daily', key },
          ])
      : (key: string) => limiter.consume('main', key);
  return {
    decide,
    counters: () => limiter.stats(),
    ...(client ? { roundTrips: () => writesOf(client) } : {}),
    close,
  };
}

function tokenleasePolicies(scenario: Scenario): Record<string, PolicyConfig> {
  // A typical API-key plan: a per-second token bucket plus a daily quota as a fixed window.
  const daily: PolicyConfig = { algorithm: 'fixed-window', limit: DAILY.burst, window: '1d' };
  return {
    main: policy(mainLimit(scenario), scenario === 'miss'),
    ...(scenario === 'multi' ? { daily } : {}),
  };
}

/** rate-limiter-flexible rejects its promise with a RateLimiterRes when limited, with an Error when broken. */
function rlfOutcome(promise: Promise<unknown>): Promise<Verdict> {
  return promise.then(
    () => ALLOW,
    (reason: unknown) => {
      if (reason instanceof Error) throw reason;
      return DENY;
    },
  );
}

interface RlfLimiter {
  consume(key: string): Promise<unknown>;
}

function rlfDecider(limiter: RlfLimiter, close: () => Promise<void>, client?: Redis): Decider {
  return {
    decide: (key) => rlfOutcome(limiter.consume(key)),
    ...(client ? { roundTrips: () => writesOf(client) } : {}),
    close,
  };
}

const SEED_SCRIPT = readFileSync(new URL('./seed_token_bucket.lua', import.meta.url), 'utf8');

async function seedLuaDecider(client: Redis, prefix: string, scenario: Scenario): Promise<Decider> {
  const sha = (await client.script('LOAD', SEED_SCRIPT)) as string;
  const call = (limit: Limit, key: string) =>
    client.evalsha(sha, 1, key, limit.rate / limit.periodS, limit.burst, 1).then((r) => r === 1);
  const verdict = (ok: boolean) => (ok ? ALLOW : DENY);
  const main = mainLimit(scenario);
  const decide =
    scenario === 'multi'
      ? async (key: string) => {
          // Both rules in parallel, as a user of a per-request script would; no refund if one refuses.
          const [a, b] = await Promise.all([
            call(main, `${prefix}s:${key}`),
            call(DAILY, `${prefix}d:${key}`),
          ]);
          return verdict(a && b);
        }
      : (key: string) => call(main, `${prefix}s:${key}`).then(verdict);
  return { decide, roundTrips: () => writesOf(client), close: () => disconnect(client) };
}

/**
 * The default 50 ms suits production; on a shared 2-core bench machine a descheduled process can
 * exceed it, and the peers have no timeout at all. Throughput and latency do not depend on it.
 */
const STORE_TIMEOUT_MS = 1000;

export const MAP_SYNC: Contestant = {
  id: 'map-sync',
  label: 'Map bucket, sync loop',
  redis: false,
  sync: true,
  create: async (scenario) => mapDecider(scenario),
};

export const MAP_FLOOR: Contestant = {
  id: 'map',
  label: 'Map bucket (floor)',
  redis: false,
  create: async (scenario) => mapDecider(scenario),
};

export const TOKENLEASE_MEMORY: Contestant = {
  id: 'tokenlease-memory',
  label: 'tokenlease MemoryStore',
  redis: false,
  async create(scenario) {
    const store = new MemoryStore();
    const limiter = new Limiter({ store, policies: tokenleasePolicies(scenario) });
    return tokenleaseDecider(limiter, scenario, async () => {
      await limiter.close();
      await store.close();
    });
  },
};

export const RLF_MEMORY: Contestant = {
  id: 'rlf-memory',
  label: 'rate-limiter-flexible Memory',
  redis: false,
  async create(scenario) {
    const make = (limit: Limit, keyPrefix: string) =>
      new RateLimiterMemory({ points: limit.burst, duration: limit.periodS, keyPrefix });
    const main = make(mainLimit(scenario), 'main');
    const limiter = scenario === 'multi' ? new RateLimiterUnion(main, make(DAILY, 'daily')) : main;
    return rlfDecider(limiter, async () => {});
  },
};

export const TOKENLEASE_REDIS: Contestant = {
  id: 'tokenlease-redis',
  label: 'tokenlease RedisStore',
  redis: true,
  async create(scenario, env) {
    const client = await connect(env.redisUrl);
    const store = new RedisStore({ client, prefix: env.prefix, timeoutMs: STORE_TIMEOUT_MS });
    const limiter = new Limiter({ store, policies: tokenleasePolicies(scenario) });
    return tokenleaseDecider(
      limiter,
      scenario,
      async () => {
        await limiter.close();
        await store.close();
        await disconnect(client);
      },
      client,
    );
  },
};

export const RLF_REDIS: Contestant = {
  id: 'rlf-redis',
  label: 'rate-limiter-flexible Redis',
  redis: true,
  async create(scenario, env) {
    const client = await connect(env.redisUrl);
    // inMemoryBlockOnConsumed is rate-limiter-flexible's own answer for denied keys: once a key is
    // over its points it is refused from memory until its window ends, without asking Redis.
    const make = (limit: Limit, name: string) =>
      new RateLimiterRedis({
        storeClient: client,
        points: limit.burst,
        duration: limit.periodS,
        keyPrefix: `${env.prefix}${name}`,
        inMemoryBlockOnConsumed: limit.burst + 1,
      });
    const main = make(mainLimit(scenario), 'main');
    const limiter = scenario === 'multi' ? new RateLimiterUnion(main, make(DAILY, 'daily')) : main;
    return rlfDecider(limiter, () => disconnect(client), client);
  },
};

export const LUA_PER_REQUEST: Contestant = {
  id: 'lua',
  label: 'per-request Lua (EVALSHA)',
  redis: true,
  async create(scenario, env) {
    return seedLuaDecider(await connect(env.redisUrl), env.prefix, scenario);
  },
};

/** HTTP baseline: no limiter at all. */
export const NONE: Contestant = {
  id: 'none',
  label: 'no limiter',
  redis: false,
  sync: true,
  create: async () => ({ decide: () => ALLOW, close: async () => {} }),
};

export const ALL: readonly Contestant[] = [
  MAP_SYNC,
  MAP_FLOOR,
  TOKENLEASE_MEMORY,
  RLF_MEMORY,
  TOKENLEASE_REDIS,
  RLF_REDIS,
  LUA_PER_REQUEST,
  NONE,
];

export function contestant(id: string): Contestant {
  const c = ALL.find((x) => x.id === id);
  if (!c)
    throw new Error(`unknown contestant ${JSON.stringify(id)}; known: ${ALL.map((x) => x.id).join(', ')}`);
  return c;
}
