import { createHash } from 'node:crypto';
import { Plans, RateLimitCore, type RequestView } from '../src/http/index.js';
import { ConfigError, type Limiter, type PolicyConfig } from '../src/index.js';
import { type PolicyModel, policyLabel, policyModel } from './policies.js';

/** One request as the simulated gateways see it. */
export interface SimRequest {
  /** The client key (API key, user, IP): what the log's key column or the scenario's key names. */
  key: string;
  cost: number;
  attempt: number;
  method?: string | undefined;
  path?: string | undefined;
  /** The log's instance column: the gateway that served it. */
  instance?: string | undefined;
  /** The client's IP (the log's ip column); without one, `addressOf(key)`. */
  ip?: string | undefined;
}

/**
 * The address of a client whose IP the traffic does not give (a log without an IP column, the
 * scenarios' generated keys): one of its own per client key, in 10.0.0.0/8, so rules keyed by IP
 * count clients apart instead of in one shared bucket.
 */
export function addressOf(key: string): string {
  const h = createHash('sha1').update(key).digest();
  return `10.${h[0]}.${h[1]}.${h[2]}`;
}

/** One limiter check of a decision: what a rule counted for the request. */
export interface CheckResult {
  policy: string;
  key: string;
  cost: number;
  remaining: number;
  limit: number;
}

export interface GatewayDecision {
  allowed: boolean;
  retryAfterMs: number;
  /** The enforced checks (one for a single policy, one per matching rule with plans). */
  checks: CheckResult[];
  /** Decided without a store call for this request (leased tokens, a remembered denial). */
  local: boolean;
}

/** A gateway's limiting in front of one `Limiter`: what a request meets and how it is decided. */
export type Gateway = (req: SimRequest) => Promise<GatewayDecision>;

/**
 * What the user deploys: the limiter's policies and how a request becomes limiter checks. The exact
 * reference runs the same deployment with every policy in exact mode.
 */
export interface Deployment {
  /** "token-bucket 100/1s burst 100" or "plans.yaml": for reports. */
  readonly label: string;
  readonly policies: Record<string, PolicyConfig>;
  /** Per policy: its exact form, sustained rate and envelope. */
  readonly models: ReadonlyMap<string, PolicyModel>;
  /**
   * The policy every request meets, that a scenario's demand is a multiple of: the single policy,
   * or a plans file's first enforced rule of its default plan for all routes (else a global one).
   */
  readonly primary: string;
  gateway(limiter: Limiter): Gateway;
}

/** The policy's name inside every simulated limiter with a single policy (it shows up in store keys). */
export const POLICY = 'sim';

/** The same policies in exact mode: the reference's. */
export function exactPolicies(d: Deployment): Record<string, PolicyConfig> {
  return Object.fromEntries(Object.keys(d.policies).map((name) => [name, d.models.get(name)!.exact]));
}

/** One policy, every request checked against it under its client key (a scenario's policy, `--policy`). */
export function singlePolicy(policy: PolicyConfig, field = 'policy'): Deployment {
  const model = policyModel(policy, field);
  return {
    label: policyLabel(policy),
    policies: { [POLICY]: policy },
    models: new Map([[POLICY, model]]),
    primary: POLICY,
    gateway: (limiter) => async (req) => {
      const d = await limiter.consume(POLICY, req.key, req.cost);
      return {
        allowed: d.allowed,
        retryAfterMs: d.retryAfterMs,
        checks: [{ policy: POLICY, key: req.key, cost: req.cost, remaining: d.remaining, limit: d.limit }],
        local: d.source === 'lease',
      };
    },
  };
}

/**
 * A plans file, decided by the library's own HTTP core (`RateLimitCore`) as the middleware would:
 * global rules and the client's plan, route costs, shadow rules, allow and deny lists. The log's
 * key is the client identity (listed API keys get their plan, others the default plan); a request
 * without a method and path is `GET /`.
 */
export function plansFile(path: string, mapPolicy: (p: PolicyConfig) => PolicyConfig = (p) => p): Deployment {
  const plans = Plans.fromFile(path);
  const label = path;
  const models = new Map<string, PolicyModel>();
  const policies = Object.fromEntries(
    Object.entries(plans.policies).map(([name, policy]) => [name, mapPolicy(policy)]),
  );
  for (const [name, policy] of Object.entries(policies)) {
    if (policy.algorithm === 'concurrency') {
      throw new ConfigError(
        `plans.${name}`,
        'concurrency limits slots held at once, not a rate: the simulator drives consume(), which it has not',
      );
    }
    models.set(name, policyModel(policy, `plans.${name}`));
  }
  const view = (req: SimRequest): RequestView => ({
    method: req.method ?? 'GET',
    path: req.path ?? '/',
    headers: { 'x-api-key': req.key },
    remoteAddress: req.ip ?? addressOf(req.key),
  });
  const set = plans.ruleSet();
  const everyRequest = [...(set.defaultPlan ? (set.plans.get(set.defaultPlan) ?? []) : []), ...set.rules];
  const primary =
    everyRequest.find((r) => !r.shadow && r.routes === undefined)?.policy ?? Object.keys(policies)[0]!;
  return {
    label,
    policies,
    models,
    primary,
    gateway: (limiter) => {
      const core = new RateLimitCore<SimRequest>(
        { limiter, plans, keyGenerator: (req) => req.key, standardHeaders: false, onError: () => {} },
        view,
      );
      return async (req) => {
        const outcome = await core.check(req);
        const info = outcome.info;
        const checks: CheckResult[] = [];
        let local = true;
        for (const r of info?.rules ?? []) {
          if (r.decision && r.decision.source !== 'lease') local = false;
          if (r.enforced && r.decision) {
            checks.push({
              policy: r.policy,
              key: r.key,
              cost: r.cost,
              remaining: r.decision.remaining,
              limit: r.decision.limit,
            });
          }
        }
        return {
          allowed: outcome.action === 'next',
          retryAfterMs: info?.retryAfterMs ?? 0,
          checks,
          local,
        };
      };
    },
  };
}
