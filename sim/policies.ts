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
};

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
  return model(policy as PolicyConfig, rule);
}
