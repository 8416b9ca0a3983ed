import { MONTH } from './algorithms/fixedWindow.js';
import { type Duration, MAX_DURATION_MS, parseDuration, TIMED } from './duration.js';
import { ConfigError, shown } from './errors.js';
import { countOption, isOptionsObject, knownOptions } from './options.js';

/**
 * What a rule does while its store is unreachable (docs/operations.md):
 * - `'local'`: an in-process bucket holding this instance's share of the limit;
 * - `'open'`: allow everything, reported as `source: 'fallback'`;
 * - `'closed'`: deny everything, with `retryAfterMs` until the store is probed again.
 *
 * In every mode, tokens already leased keep serving first.
 */
export type FailMode = 'local' | 'open' | 'closed';
const FAIL_MODES: readonly FailMode[] = ['local', 'open', 'closed'];

/** How an instance leases tokens for a policy. */
export interface LeaseOptions {
  /**
   * Largest lease, as a fraction of the burst (the limit).
   * @default 0.1
   */
  maxFraction?: number;
  /**
   * How far into the future a lease may reach, as refill time. Leasing tokens that will only exist
   * later keeps an oversubscribed key from sending every instance to the store for each token.
   * @default the time to refill two bursts (`2 * burst / rate * period`), at most the lease `ttl`: room
   * for every instance of a busy key to hold one lease in the queue, so an oversubscribed key rarely
   * sends anyone back empty-handed, and never a token further off than a lease time
   */
  ahead?: Duration;
  /**
   * How long unused leased tokens are kept after the last of them exists, before they are handed back.
   * @default '2s'
   */
  ttl?: Duration;
  /**
   * Leases are sized to this much of the instance's recent demand.
   * @default '500ms'
   */
  horizon?: Duration;
  /**
   * Far from the limit, admit locally within an allowance the store grants (a share of what the
   * bucket holds while at least half full, divided by the fleet) and report usage later in a batch; admit a
   * key's first request on an instance before the store answers. This trades a stated
   * over-admission (docs/architecture.md "Guarantees": at most half the burst, plus one
   * request per instance seeing a key for the first time) for a store call per allowance instead
   * of per lease. `false` keeps every admission backed by tokens the store debited.
   * @default true
   */
  writeBehind?: boolean;
}

export interface TokenBucketPolicy {
  algorithm: 'token-bucket';
  /** Tokens added per `period`. */
  rate: number;
  /** @default '1s' */
  period?: Duration;
  /**
   * Capacity: the most a quiet client can spend at once. Also the policy's `limit`.
   * @default rate
   */
  burst?: number;
  /** Lease tuning, or `'exact'` for one store call per decision (lease = the cost). */
  lease?: LeaseOptions | 'exact';
  /**
   * What to do while the store is unreachable (docs/operations.md): `'local'` admits this
   * instance's share of the limit from an in-process bucket, `'open'` allows, `'closed'` denies.
   * Tokens already leased keep serving first in every mode.
   * @default 'local'
   */
  fail?: FailMode;
}

/** Lease tuning of the windowed counters: a lease is a slice of the current window's quota. */
export interface WindowLeaseOptions {
  /**
   * Largest slice, as a fraction of the quota still left in the window (so slices shrink as the
   * window's quota runs out, down to 1 token: near the limit every decision is exact).
   * @default 0.1
   */
  maxFraction?: number;
  /**
   * How long after its grant an unused slice is handed back (to the same window; a slice is
   * dropped when its window ends).
   * @default '2s'
   */
  ttl?: Duration;
  /**
   * Slices are sized to this much of the instance's recent demand, and never to more than it can
   * use before the window ends. Accuracy falls as the horizon grows against the window (tokens
   * held at one instance while another's requests are refused, and lost when the window ends), so
   * short windows get a short horizon — and leasing saves little when each instance sees only a
   * few tokens per window.
   * @default '500ms', or a fortieth of the window when that is shorter
   */
  horizon?: Duration;
  /**
   * Far from the limit, admit locally within an allowance the store grants for the current window
   * (a share of the room left, while at least half the limit is left) and report usage later in a
   * batch. See `LeaseOptions.writeBehind` and docs/architecture.md "Guarantees" for the bound.
   * Unlike the token bucket, a key's first request on an instance waits for the store.
   * @default true
   */
  writeBehind?: boolean;
}

export interface FixedWindowPolicy {
  algorithm: 'fixed-window';
  /** Most tokens per window. Also the policy's `limit`. */
  limit: number;
  /**
   * Window length, aligned to the Unix epoch (so `'1d'` runs from UTC midnight to UTC midnight),
   * or `'month'` for calendar months in UTC.
   */
  window: Duration | 'month';
  /**
   * Where windows start: `'epoch'` on the grid above (every key's window ends at the same time),
   * `'first-hit'` at a key's first request after its previous window ended, as express-rate-limit
   * and @fastify/rate-limit count (not with `'month'`).
   * @default 'epoch'
   */
  anchor?: 'epoch' | 'first-hit';
  /**
   * Lease tuning, or `'exact'` for one store call per decision (lease = the cost).
   * @default {} (leased, with the defaults of `WindowLeaseOptions`)
   */
  lease?: WindowLeaseOptions | 'exact';
  /**
   * What to do while the store is unreachable (docs/operations.md).
   * @default 'local'
   */
  fail?: FailMode;
}

export interface SlidingWindowPolicy {
  algorithm: 'sliding-window';
  /** Most tokens per sliding window (estimated from two fixed windows). Also the policy's `limit`. */
  limit: number;
  /** Window length, aligned to the Unix epoch. */
  window: Duration;
  /**
   * Lease tuning, or `'exact'` for one store call per decision (lease = the cost).
   * @default {} (leased, with the defaults of `WindowLeaseOptions`)
   */
  lease?: WindowLeaseOptions | 'exact';
  /**
   * What to do while the store is unreachable (docs/operations.md).
   * @default 'local'
   */
  fail?: FailMode;
}

export interface SlidingLogPolicy {
  algorithm: 'sliding-log';
  /** Most units admitted in any interval of length `window` (an integer). Also the policy's `limit`. */
  limit: number;
  window: Duration;
  /**
   * Quantised mode: count in buckets of this length instead of one entry per unit. Memory becomes
   * at most `window / quantum + 1` counters; an admitted unit is forgotten up to `quantum` late.
   * @default undefined (exact: one entry per admitted unit)
   */
  quantum?: Duration;
  /**
   * Always exact (it exists for exactness); `'exact'` is accepted so any policy can say it.
   * @default 'exact'
   */
  lease?: 'exact';
  /**
   * What to do while the store is unreachable (docs/operations.md).
   * @default 'local'
   */
  fail?: FailMode;
}

export interface LeakyBucketPolicy {
  algorithm: 'leaky-bucket';
  /** Units drained per `period`. */
  rate: number;
  /** @default '1s' */
  period?: Duration;
  /**
   * Units that pass at once into an empty bucket. Also the policy's `limit`.
   * @default 1 (pure shaping: requests leave exactly `period / rate` apart)
   */
  burst?: number;
  /**
   * How long `wait()` and `reserve()` may make a request wait when the call does not say
   * (0: never); `consume()` never waits.
   * @default '1s'
   */
  maxWait?: Duration;
  /**
   * Always exact: every decision reserves a turn in the shared drain.
   * @default 'exact'
   */
  lease?: 'exact';
  /**
   * What `consume()` does while the store is unreachable (docs/operations.md); `reserve()`
   * and `wait()` reject with the store's error instead.
   * @default 'local'
   */
  fail?: FailMode;
}

/** Lease tuning of concurrency slots: an instance may hold a block of free slots. */
export interface ConcurrencyLeaseOptions {
  /**
   * Largest block, as a fraction of the slots free across the cluster (shrinking to 1 near the limit).
   * @default 0.1
   */
  maxFraction?: number;
  /**
   * How long a leased slot may sit unused at an instance before it is handed back.
   * @default '2s'
   */
  ttl?: Duration;
}

export interface ConcurrencyPolicy {
  algorithm: 'concurrency';
  /** Most slots held at once (an integer). Also the policy's `limit`. */
  limit: number;
  /**
   * A held slot expires this long after its last renewal. The limiter renews the slots it holds
   * (on its sweep timer), so only the slots of an instance that died expire.
   * @default '30s'
   */
  slotTtl?: Duration;
  /**
   * Lease tuning, or `'exact'` for one store call per acquire and per release.
   * @default {} (leased, with the defaults of `ConcurrencyLeaseOptions`)
   */
  lease?: ConcurrencyLeaseOptions | 'exact';
}

export type PolicyConfig =
  | TokenBucketPolicy
  | FixedWindowPolicy
  | SlidingWindowPolicy
  | SlidingLogPolicy
  | LeakyBucketPolicy
  | ConcurrencyPolicy;
export type Algorithm = PolicyConfig['algorithm'];

/** A validated policy with every default filled in and units in ms. */
export interface TokenBucketRule {
  readonly name: string;
  readonly algorithm: 'token-bucket';
  readonly rate: number;
  readonly periodMs: number;
  readonly burst: number;
  readonly ratePerMs: number;
  readonly exact: boolean;
  readonly maxLease: number;
  /** Tokens the level may go below zero. */
  readonly ahead: number;
  readonly leaseTtlMs: number;
  readonly horizonMs: number;
  /** See `LeaseOptions.writeBehind`. */
  readonly writeBehind: boolean;
  readonly fail: FailMode;
}

export interface WindowRule<A extends WindowAlgorithm = WindowAlgorithm> {
  readonly name: string;
  readonly algorithm: A;
  readonly limit: number;
  /** Window length in ms; `MONTH` (0) for calendar months (fixed window only). */
  readonly windowMs: number;
  /** Fixed window only: windows open at a key's first request (`anchor: 'first-hit'`). */
  readonly firstHit: boolean;
  readonly exact: boolean;
  readonly maxFraction: number;
  readonly leaseTtlMs: number;
  readonly horizonMs: number;
  /** See `WindowLeaseOptions.writeBehind`. */
  readonly writeBehind: boolean;
  readonly fail: FailMode;
}

/** Costs must be whole numbers (one log entry, one slot, per unit). */
interface WholeUnits {
  readonly wholeUnits: true;
}

export interface SlidingLogRule extends WholeUnits {
  readonly name: string;
  readonly algorithm: 'sliding-log';
  readonly limit: number;
  readonly windowMs: number;
  /** 0 for the exact log. */
  readonly quantumMs: number;
  readonly fail: FailMode;
}

export interface LeakyBucketRule {
  readonly name: string;
  readonly algorithm: 'leaky-bucket';
  readonly rate: number;
  readonly periodMs: number;
  readonly burst: number;
  readonly maxWaitMs: number;
  readonly fail: FailMode;
}

export interface ConcurrencyRule extends WholeUnits {
  readonly name: string;
  readonly algorithm: 'concurrency';
  readonly limit: number;
  readonly slotTtlMs: number;
  readonly exact: boolean;
  readonly maxFraction: number;
  readonly leaseTtlMs: number;
}

type WindowAlgorithm = 'fixed-window' | 'sliding-window';

export type Rule =
  | TokenBucketRule
  | WindowRule<'fixed-window'>
  | WindowRule<'sliding-window'>
  | SlidingLogRule
  | LeakyBucketRule
  | ConcurrencyRule;

/** Token counts above this would lose whole tokens to double rounding. */
const MAX_TOKENS = 1e15;

function positive(value: unknown, field: string): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
    throw new ConfigError(field, `expected a positive finite number, got ${shown(value)}`);
  }
  return value;
}

function tokens(value: unknown, field: string): number {
  const n = positive(value, field);
  if (n > MAX_TOKENS) throw new ConfigError(field, `expected at most ${MAX_TOKENS}, got ${n}`);
  return n;
}

function refillTime(ms: number, field: string): number {
  // The same bound as every duration's: it keeps the bucket's TTL far below what Redis can express.
  if (!(ms <= MAX_DURATION_MS)) {
    throw new ConfigError(
      field,
      `the bucket would take ${ms} ms to refill; expected at most ${MAX_DURATION_MS} ms (about 31.7 years)`,
    );
  }
  return ms;
}

function fraction(value: unknown, field: string): number {
  const n = positive(value, field);
  if (n > 1) throw new ConfigError(field, `expected a number in (0, 1], got ${n}`);
  return n;
}

function failMode(value: unknown, field: string): FailMode {
  if (value === undefined) return 'local';
  if (FAIL_MODES.includes(value as FailMode)) return value as FailMode;
  const expected = FAIL_MODES.map((m) => `'${m}'`).join(', ');
  throw new ConfigError(field, `expected one of ${expected}, got ${shown(value)}`);
}

function tokenBucket(name: string, raw: TokenBucketPolicy, field: string): TokenBucketRule {
  const rate = tokens(raw.rate, `${field}.rate`);
  const periodMs = parseDuration(raw.period ?? '1s', `${field}.period`);
  const burst = raw.burst === undefined ? rate : tokens(raw.burst, `${field}.burst`);
  const ratePerMs = rate / periodMs;
  if (!(ratePerMs <= MAX_TOKENS)) {
    throw new ConfigError(
      `${field}.period`,
      `expected at most ${MAX_TOKENS} tokens per ms, got ${ratePerMs}`,
    );
  }
  refillTime(burst / ratePerMs, `${field}.rate`);
  const fail = failMode(raw.fail, `${field}.fail`);
  const lease = raw.lease ?? {};
  if (lease === 'exact') {
    return {
      name,
      algorithm: 'token-bucket',
      rate,
      periodMs,
      burst,
      ratePerMs,
      exact: true,
      maxLease: 0,
      ahead: 0,
      leaseTtlMs: 0,
      horizonMs: 0,
      writeBehind: false,
      fail,
    };
  }
  leaseObject<LeaseOptions>(lease, field);
  const maxFraction =
    lease.maxFraction === undefined ? 0.1 : fraction(lease.maxFraction, `${field}.lease.maxFraction`);
  const leaseTtlMs = parseDuration(lease.ttl ?? '2s', `${field}.lease.ttl`);
  // By default no further than a lease time: a token that exists only later than that would sit in
  // one instance's lease, its refusals stating that far-off wait, while peers' leases come back.
  const aheadMs =
    lease.ahead === undefined
      ? Math.min((2 * burst) / ratePerMs, leaseTtlMs)
      : refillTime(parseDuration(lease.ahead, `${field}.lease.ahead`), `${field}.lease.ahead`);
  return {
    name,
    algorithm: 'token-bucket',
    rate,
    periodMs,
    burst,
    ratePerMs,
    exact: false,
    maxLease: Math.max(1, Math.floor(burst * maxFraction)),
    ahead: aheadMs * ratePerMs,
    leaseTtlMs,
    horizonMs: parseDuration(lease.horizon ?? '500ms', `${field}.lease.horizon`),
    writeBehind: writeBehind(lease.writeBehind, field),
    fail,
  };
}

/** `lease.writeBehind`: on unless turned off. */
function writeBehind(value: unknown, field: string): boolean {
  if (value === undefined) return true;
  if (typeof value !== 'boolean') {
    throw new ConfigError(`${field}.lease.writeBehind`, `expected a boolean, got ${shown(value)}`);
  }
  return value;
}

/** `lease` of an algorithm that is always exact: absent or `'exact'`. */
function alwaysExact(lease: unknown, field: string, algorithm: string): void {
  if (lease !== undefined && lease !== 'exact') {
    throw new ConfigError(`${field}.lease`, `${algorithm} is always exact: expected 'exact' or nothing`);
  }
}

function leaseObject<T extends object>(lease: unknown, field: string): T {
  if (!isOptionsObject(lease)) {
    throw new ConfigError(`${field}.lease`, `expected lease options or 'exact', got ${shown(lease)}`);
  }
  return lease as T;
}

function windowed<A extends WindowAlgorithm>(
  name: string,
  raw: FixedWindowPolicy | SlidingWindowPolicy,
  field: string,
  algorithm: A,
): WindowRule<A> {
  const limit = tokens(raw.limit, `${field}.limit`);
  let windowMs: number;
  if (raw.window === 'month') {
    if (algorithm !== 'fixed-window') {
      throw new ConfigError(
        `${field}.window`,
        `calendar months are for 'fixed-window' only; give a duration`,
      );
    }
    windowMs = MONTH;
  } else {
    windowMs = parseDuration(raw.window, `${field}.window`);
  }
  const anchor = 'anchor' in raw ? (raw.anchor ?? 'epoch') : 'epoch';
  if (anchor !== 'epoch' && anchor !== 'first-hit') {
    throw new ConfigError(`${field}.anchor`, `expected 'epoch' or 'first-hit', got ${shown(anchor)}`);
  }
  if (anchor === 'first-hit' && algorithm !== 'fixed-window') {
    throw new ConfigError(`${field}.anchor`, `'first-hit' is for 'fixed-window' only`);
  }
  if (anchor === 'first-hit' && windowMs === MONTH) {
    throw new ConfigError(
      `${field}.anchor`,
      `calendar months start on the 1st: expected 'epoch' with 'month'`,
    );
  }
  const rule = {
    name,
    algorithm,
    limit,
    windowMs,
    firstHit: anchor === 'first-hit',
    fail: failMode(raw.fail, `${field}.fail`),
  };
  if (raw.lease === 'exact') {
    return { ...rule, exact: true, maxFraction: 0, leaseTtlMs: 0, horizonMs: 0, writeBehind: false };
  }
  const lease = leaseObject<WindowLeaseOptions>(raw.lease ?? {}, field);
  return {
    ...rule,
    exact: false,
    writeBehind: writeBehind(lease.writeBehind, field),
    maxFraction:
      lease.maxFraction === undefined ? 0.1 : fraction(lease.maxFraction, `${field}.lease.maxFraction`),
    leaseTtlMs: parseDuration(lease.ttl ?? '2s', `${field}.lease.ttl`),
    horizonMs:
      lease.horizon === undefined
        ? Math.min(500, windowMs === MONTH ? 500 : windowMs / 40)
        : parseDuration(lease.horizon, `${field}.lease.horizon`),
  };
}

/** Most buckets a quantised log may have, so a refused request's walk over them stays short. */
const MAX_BUCKETS = 10_000;

function slidingLog(name: string, raw: SlidingLogPolicy, field: string): SlidingLogRule {
  const limit = countOption(raw.limit, `${field}.limit`, MAX_TOKENS);
  const windowMs = parseDuration(raw.window, `${field}.window`);
  alwaysExact(raw.lease, field, 'sliding-log');
  let quantumMs = 0;
  if (raw.quantum !== undefined) {
    quantumMs = parseDuration(raw.quantum, `${field}.quantum`);
    if (quantumMs > windowMs || windowMs / quantumMs > MAX_BUCKETS) {
      throw new ConfigError(
        `${field}.quantum`,
        `expected a duration from window / ${MAX_BUCKETS} (${windowMs / MAX_BUCKETS} ms) up to the window (${windowMs} ms), got ${quantumMs} ms`,
      );
    }
  }
  const fail = failMode(raw.fail, `${field}.fail`);
  return { name, algorithm: 'sliding-log', limit, windowMs, quantumMs, wholeUnits: true, fail };
}

function leakyBucket(name: string, raw: LeakyBucketPolicy, field: string): LeakyBucketRule {
  alwaysExact(raw.lease, field, 'leaky-bucket');
  // 0 is allowed here (never wait), unlike durations elsewhere; `wait()` sleeps on a timer.
  const maxWaitMs = raw.maxWait === 0 ? 0 : parseDuration(raw.maxWait ?? '1s', `${field}.maxWait`, TIMED);
  const rate = tokens(raw.rate, `${field}.rate`);
  const periodMs = parseDuration(raw.period ?? '1s', `${field}.period`);
  const burst = raw.burst === undefined ? 1 : tokens(raw.burst, `${field}.burst`);
  // The same bounds as a token bucket's (found by the fuzz test): a drain this slow or a burst this
  // large overflows the arithmetic, and the key's TTL must stay within what Redis accepts.
  if (!(rate / periodMs <= MAX_TOKENS)) {
    throw new ConfigError(
      `${field}.period`,
      `expected at most ${MAX_TOKENS} units per ms, got ${rate / periodMs}`,
    );
  }
  refillTime((burst * periodMs) / rate, `${field}.rate`);
  return {
    name,
    algorithm: 'leaky-bucket',
    rate,
    periodMs,
    burst,
    maxWaitMs,
    fail: failMode(raw.fail, `${field}.fail`),
  };
}

function concurrency(name: string, raw: ConcurrencyPolicy, field: string): ConcurrencyRule {
  const limit = countOption(raw.limit, `${field}.limit`, MAX_TOKENS);
  const slotTtlMs = parseDuration(raw.slotTtl ?? '30s', `${field}.slotTtl`);
  const rule = { name, algorithm: 'concurrency', limit, slotTtlMs, wholeUnits: true } as const;
  if (raw.lease === 'exact') return { ...rule, exact: true, maxFraction: 0, leaseTtlMs: 0 };
  const lease = leaseObject<ConcurrencyLeaseOptions>(raw.lease ?? {}, field);
  return {
    ...rule,
    exact: false,
    maxFraction:
      lease.maxFraction === undefined ? 0.1 : fraction(lease.maxFraction, `${field}.lease.maxFraction`),
    leaseTtlMs: parseDuration(lease.ttl ?? '2s', `${field}.lease.ttl`),
  };
}

const COMPILERS: { [A in Algorithm]: (name: string, raw: never, field: string) => Rule } = {
  'token-bucket': tokenBucket,
  'fixed-window': (name, raw, field) => windowed(name, raw, field, 'fixed-window'),
  'sliding-window': (name, raw, field) => windowed(name, raw, field, 'sliding-window'),
  'sliding-log': slidingLog,
  'leaky-bucket': leakyBucket,
  concurrency,
};

const WINDOW_LEASE = ['maxFraction', 'ttl', 'horizon', 'writeBehind'] as const;

/**
 * The options of each algorithm, and of its lease object where it has one. Anything else is a
 * typo or an option of another algorithm, which would otherwise be silently ignored (a
 * concurrency policy's `fail`, a token bucket's `limit`).
 */
const OPTIONS: { [A in Algorithm]: { policy: readonly string[]; lease?: readonly string[] } } = {
  'token-bucket': {
    policy: ['algorithm', 'rate', 'period', 'burst', 'lease', 'fail'],
    lease: ['maxFraction', 'ahead', 'ttl', 'horizon', 'writeBehind'],
  },
  'fixed-window': {
    policy: ['algorithm', 'limit', 'window', 'anchor', 'lease', 'fail'],
    lease: WINDOW_LEASE,
  },
  'sliding-window': {
    policy: ['algorithm', 'limit', 'window', 'anchor', 'lease', 'fail'],
    lease: WINDOW_LEASE,
  },
  'sliding-log': { policy: ['algorithm', 'limit', 'window', 'quantum', 'lease', 'fail'] },
  'leaky-bucket': { policy: ['algorithm', 'rate', 'period', 'burst', 'maxWait', 'lease', 'fail'] },
  concurrency: { policy: ['algorithm', 'limit', 'slotTtl', 'lease'], lease: ['maxFraction', 'ttl'] },
};

/** The options a policy of `algorithm` takes (`undefined` for an algorithm there is none of). */
export function policyOptions(algorithm: string): readonly string[] | undefined {
  return Object.hasOwn(OPTIONS, algorithm) ? OPTIONS[algorithm as Algorithm].policy : undefined;
}

/** Validates one policy; errors name the field as `policies.<name>.<option>`. */
export function compilePolicy(name: string, raw: unknown): Rule {
  const field = `policies.${name}`;
  if (typeof raw !== 'object' || raw === null) throw new ConfigError(field, 'expected a policy object');
  const algorithm = (raw as { algorithm?: unknown }).algorithm;
  if (typeof algorithm !== 'string' || !Object.hasOwn(COMPILERS, algorithm)) {
    const known = Object.keys(COMPILERS).map((a) => `'${a}'`);
    throw new ConfigError(
      `${field}.algorithm`,
      `expected one of ${known.join(', ')}, got ${shown(algorithm)}`,
    );
  }
  const options = OPTIONS[algorithm as Algorithm];
  knownOptions(raw, options.policy, field);
  noNulls(raw, field);
  const lease = (raw as { lease?: unknown }).lease;
  if (options.lease && typeof lease === 'object' && lease !== null) {
    knownOptions(lease, options.lease, `${field}.lease`);
    noNulls(lease, `${field}.lease`);
  }
  return COMPILERS[algorithm as Algorithm](name, raw as never, field);
}

/**
 * An option given as null (JSON, or a YAML key left empty) is refused rather than read as its
 * default, as `?? default` would: `period:` left empty must not quietly mean one second.
 */
function noNulls(value: object, field: string): void {
  for (const [option, v] of Object.entries(value)) {
    if (v === null)
      throw new ConfigError(
        `${field}.${option}`,
        'expected a value, got null (leave the option out for its default)',
      );
  }
}

export function compilePolicies(raw: unknown): Map<string, Rule> {
  if (!isOptionsObject(raw)) {
    throw new ConfigError('policies', 'expected an object mapping policy names to policies');
  }
  const rules = new Map<string, Rule>();
  for (const [name, policy] of Object.entries(raw)) {
    if (name.length === 0) throw new ConfigError('policies', 'policy names must not be empty');
    rules.set(name, compilePolicy(name, policy));
  }
  if (rules.size === 0) throw new ConfigError('policies', 'expected at least one policy');
  return rules;
}
