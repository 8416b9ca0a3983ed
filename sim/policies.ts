import { MONTH } from '../src/algorithms/fixedWindow.js';
import { ConfigError, type PolicyConfig } from '../src/index.js';
import { compilePolicy, type Rule } from '../src/policy.js';

/**
 * What the simulator needs to know about a policy, per algorithm. Supporting a new algorithm is one
 * entry in `MODELS`: its exact reference, its sustained rate, and (when it has one) the envelope the
 * design promises for it.
 */
export interface PolicyModel {
  /** The same policy deciding every request at the store: the reference a run is compared with. */
  readonly exact: PolicyConfig;
  /** Sustained limit in tokens per ms: demand "6×" means six times this. */
  readonly ratePerMs: number;
  /** Whether the policy under test is itself exact (then it must match the reference exactly). */
  readonly isExact: boolean;
  readonly envelope: Envelope | undefined;
}

/**
 * The most the cluster may admit for one key in any window of length L ms:
 * `capacity + ratePerMs · (L + RTT) + allowancePerInstance · (peak instances)`. `capacity + rate·L`
 * is what the exact policy itself admits; the allowance is what leasing adds; `rate·RTT` is there
 * because admissions are timed at the gateway, which hears the store's answer up to one round trip
 * (the longest modelled one) after the store decided.
 */
export interface Envelope {
  readonly capacity: number;
  readonly ratePerMs: number;
  readonly allowancePerInstance: number;
  /** The bound in words, for reports. */
  readonly formula: string;
}

type ModelOf<R extends Rule> = (
  policy: Extract<PolicyConfig, { algorithm: R['algorithm'] }>,
  rule: R,
  /** Where the policy sits in the scenario, for errors. */
  field: string,
) => PolicyModel;

const MODELS: { [A in Rule['algorithm']]: ModelOf<Extract<Rule, { algorithm: A }>> } = {
  // A held lease is at most maxLease tokens plus the next one fetched ahead before it runs out, so
  // each instance may spend up to 2·maxLease that a full shared bucket does not see.
  'token-bucket': (policy, rule) => ({
    exact: { ...policy, lease: 'exact' },
    ratePerMs: rule.ratePerMs,
    isExact: rule.exact,
    envelope: {
      capacity: rule.burst,
      ratePerMs: rule.ratePerMs,
      allowancePerInstance: rule.exact ? 0 : 2 * rule.maxLease,
      formula: rule.exact
        ? 'burst + rate·(L + RTT)'
        : `burst + rate·(L + RTT) + 2·maxLease(${rule.maxLease})·instances`,
    },
  }),
  // Every fixed window admits at most `limit`, leased or not (a slice is counted when granted and
  // dies with its window), and any interval meets at most L/window + 2 windows.
  'fixed-window': (policy, rule) => windowModel(policy, rule),
  // The counter keeps each fixed window within `limit` too; the interpolation only smooths inside it.
  'sliding-window': (policy, rule) => windowModel(policy, rule),
  // No interval of one window ever holds more than `limit`: L meets at most L/window + 1 of them.
  'sliding-log': (policy, rule) => ({
    exact: { ...policy, lease: 'exact' },
    ratePerMs: rule.limit / rule.windowMs,
    isExact: true,
    envelope: {
      capacity: rule.limit,
      ratePerMs: rule.limit / rule.windowMs,
      allowancePerInstance: 0,
      formula: 'limit + (limit / window)·(L + RTT)',
    },
  }),
  // consume() admits only what can start now: at most burst + rate·L start in any interval L.
  'leaky-bucket': (policy, rule) => ({
    exact: { ...policy, lease: 'exact' },
    ratePerMs: rule.rate / rule.periodMs,
    isExact: true,
    envelope: {
      capacity: rule.burst,
      ratePerMs: rule.rate / rule.periodMs,
      allowancePerInstance: 0,
      formula: 'burst + rate·(L + RTT)',
    },
  }),
  concurrency: (_policy, _rule, field) => {
    throw new ConfigError(
      `${field}.algorithm`,
      'concurrency limits slots held at once, not a rate: the simulator drives consume(), which it has not',
    );
  },
};

/** Shortest calendar month, for the envelope of monthly windows. */
const SHORTEST_MONTH_MS = 28 * 86_400_000;
/** Mean Gregorian month, for the sustained rate of monthly windows. */
const MEAN_MONTH_MS = (365.2425 / 12) * 86_400_000;

function windowModel(
  policy: Extract<PolicyConfig, { algorithm: 'fixed-window' | 'sliding-window' }>,
  rule: Extract<Rule, { algorithm: 'fixed-window' | 'sliding-window' }>,
): PolicyModel {
  const monthly = rule.windowMs === MONTH;
  const envelopeRate = rule.limit / (monthly ? SHORTEST_MONTH_MS : rule.windowMs);
  return {
    exact: { ...policy, lease: 'exact' },
    ratePerMs: rule.limit / (monthly ? MEAN_MONTH_MS : rule.windowMs),
    isExact: rule.exact,
    envelope: {
      capacity: 2 * rule.limit,
      ratePerMs: envelopeRate,
      allowancePerInstance: rule.exact ? 0 : 2 * Math.max(1, Math.floor(rule.limit * rule.maxFraction)),
      formula: '2·limit + (limit / window)·(L + RTT)',
    },
  };
}

/** Validates `policy` as the library would and returns its model; errors name `field`. */
export function policyModel(policy: unknown, field = 'policy'): PolicyModel {
  let rule: Rule;
  try {
    rule = compilePolicy('sim', policy);
  } catch (err) {
    if (err instanceof ConfigError && err.field !== undefined) {
      const sub = err.field.replace(/^policies\.sim\.?/, '');
      throw new ConfigError(sub ? `${field}.${sub}` : field, err.message.replace(/^Invalid `[^`]*`: /, ''));
    }
    throw err;
  }
  const model = MODELS[rule.algorithm] as ModelOf<Rule>;
  return model(policy as PolicyConfig, rule, field);
}

/** "token-bucket 100/1s burst 100, lease maxFraction 0.05". */
export function policyLabel(p: PolicyConfig): string {
  const o = p as unknown as Record<string, unknown>;
  const parts: string[] = [String(o.algorithm)];
  if (o.rate !== undefined) parts.push(`${o.rate}/${o.period ?? '1s'}`);
  if (o.limit !== undefined) parts.push(`${o.limit}/${o.window ?? '?'}`);
  if (o.burst !== undefined) parts.push(`burst ${o.burst}`);
  const lease = o.lease;
  if (lease === 'exact') parts.push('exact');
  else if (typeof lease === 'object' && lease !== null) {
    parts.push(
      `lease ${Object.entries(lease)
        .map(([k, v]) => `${k} ${String(v)}`)
        .join(' ')}`,
    );
  }
  return parts.join(' ');
}
