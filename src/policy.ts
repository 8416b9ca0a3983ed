import { type Duration, parseDuration } from './duration.js';
import { ConfigError } from './errors.js';

/**
 * What a rule does while its store is unreachable (README "Failure behaviour"):
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
   * @default the time to refill two bursts (`2 * burst / rate * period`): room for every instance of a
   * busy key to hold one lease in the queue, so an oversubscribed key rarely sends anyone back empty-handed
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
   * What to do while the store is unreachable (README "Failure behaviour"): `'local'` admits this
   * instance's share of the limit from an in-process bucket, `'open'` allows, `'closed'` denies.
   * Tokens already leased keep serving first in every mode.
   * @default 'local'
   */
  fail?: FailMode;
}

export type PolicyConfig = TokenBucketPolicy;
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
  readonly fail: FailMode;
}

export type Rule = TokenBucketRule;

const ALGORITHMS: readonly string[] = ['token-bucket'];

/** Token counts above this would lose whole tokens to double rounding. */
const MAX_TOKENS = 1e15;
/**
 * Longest a bucket may take to refill completely (about 31 years). It bounds the TTL of its key far
 * below what Redis can express, so a stored bucket always expires.
 */
const MAX_REFILL_MS = 1e12;

function positive(value: unknown, field: string): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
    throw new ConfigError(field, `expected a positive finite number, got ${String(value)}`);
  }
  return value;
}

function tokens(value: unknown, field: string): number {
  const n = positive(value, field);
  if (n > MAX_TOKENS) throw new ConfigError(field, `expected at most ${MAX_TOKENS}, got ${n}`);
  return n;
}

function refillTime(ms: number, field: string): number {
  if (!(ms <= MAX_REFILL_MS)) {
    throw new ConfigError(
      field,
      `the bucket would take ${ms} ms to refill; expected at most ${MAX_REFILL_MS} ms (about 31 years)`,
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
  throw new ConfigError(field, `expected one of ${expected}, got ${JSON.stringify(value)}`);
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
      fail,
    };
  }
  if (typeof lease !== 'object' || lease === null) {
    throw new ConfigError(`${field}.lease`, `expected lease options or 'exact', got ${String(lease)}`);
  }
  const maxFraction =
    lease.maxFraction === undefined ? 0.1 : fraction(lease.maxFraction, `${field}.lease.maxFraction`);
  const aheadMs =
    lease.ahead === undefined
      ? (2 * burst) / ratePerMs
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
    leaseTtlMs: parseDuration(lease.ttl ?? '2s', `${field}.lease.ttl`),
    horizonMs: parseDuration(lease.horizon ?? '500ms', `${field}.lease.horizon`),
    fail,
  };
}

/** Validates one policy; errors name the field as `policies.<name>.<option>`. */
export function compilePolicy(name: string, raw: unknown): Rule {
  const field = `policies.${name}`;
  if (typeof raw !== 'object' || raw === null) throw new ConfigError(field, 'expected a policy object');
  const algorithm = (raw as { algorithm?: unknown }).algorithm;
  switch (algorithm) {
    case 'token-bucket':
      return tokenBucket(name, raw as TokenBucketPolicy, field);
    default:
      throw new ConfigError(
        `${field}.algorithm`,
        `expected one of ${ALGORITHMS.map((a) => `'${a}'`).join(', ')}, got ${JSON.stringify(algorithm)}`,
      );
  }
}

export function compilePolicies(raw: unknown): Map<string, Rule> {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
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
