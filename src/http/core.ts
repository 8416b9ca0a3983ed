import type { Check, Decision } from '../decision.js';
import { ConfigError, shown } from '../errors.js';
import { consumeNow, decidedAt, type HeaderFacts, headerFacts, type Limiter } from '../limiter.js';
import { ClientIp, parseHop, type TrustProxy } from './clientIp.js';
import {
  type HeaderOptions,
  type RuleState,
  rateLimitHeaders,
  retryAfterSeconds,
  type StandardHeaders,
  standardHeadersOption,
} from './headers.js';
import type { Plans } from './plans.js';
import { keyPart, type RequestView, readApiKey } from './request.js';
import {
  forbiddenBody,
  type RefusalBody,
  type ResponseFormat,
  refusalBody,
  refusalMessage,
  unavailableBody,
} from './response.js';
import { isEnforced } from './rollout.js';
import { normalizePath, RouteTable, SplitPaths } from './routes.js';
import {
  ClientList,
  type CompiledRule,
  compileCosts,
  compileRule,
  type KeyPart,
  type RuleOptions,
  type RuleSet,
} from './rules.js';

type Awaitable<T> = T | Promise<T>;

/** Options every adapter takes; each adds its framework's own (`handler`, `hook`, …). */
export interface RateLimitOptions<Req> {
  /** The limiter that holds the policies the rules refer to. */
  limiter: Limiter;
  /** The rules each request meets, evaluated all-or-nothing. Required unless `plans` is given. */
  rules?: readonly RuleOptions<Req>[];
  /** Plans, rules, API keys, costs and allow/deny lists from a file that reloads (see `Plans`). */
  plans?: Plans;
  /**
   * Route cost table: tokens a request takes from weighted rules (`{ 'POST /reports': 20 }`).
   * Routes not listed cost 1.
   * @default {}
   */
  costs?: Record<string, number>;
  /**
   * Per-request cost, overriding the table (e.g. the size of a batch). A result that is not a
   * positive finite number counts as 1 and is reported to `onError`.
   * @default the route's cost from `costs`
   */
  cost?: number | ((req: Req) => number);
  /**
   * Header carrying the API key (compared case-insensitively, as HTTP does).
   * @default 'x-api-key'
   */
  apiKeyHeader?: string;
  /** The authenticated user of a request (e.g. `req => req.user?.id`), for rules `by: 'user'`. */
  user?: (req: Req) => string | undefined;
  /**
   * Which peers may name the client in `X-Forwarded-For` (see `TrustProxy`).
   * @default the framework's own setting (Express `trust proxy`, Fastify `trustProxy`): the
   * address it resolved; `false` for node:http
   */
  trustProxy?: TrustProxy;
  /** @default 64 */
  ipv6Subnet?: number | false;
  /**
   * The client identity (`by: 'client'`); a number counts as its decimal string. Undefined falls
   * back to the default.
   * @default with `plans`: the API key when it is listed, else the IP; without: the IP
   */
  keyGenerator?: (req: Req) => Awaitable<string | number | undefined>;
  /** Requests for which this returns true are not counted and get no headers. */
  skip?: (req: Req) => Awaitable<boolean>;
  /**
   * Clients never limited: client keys (what `keyGenerator` returns, or `apiKey=…` / `ip=…`), API
   * keys listed in the plans file, IPs, CIDR ranges, or a function of (req, client key). A key entry
   * never matches a raw API key header that nothing vouched for (anyone can send one).
   */
  allowList?: readonly string[] | ((req: Req, key: string) => Awaitable<boolean>);
  /** Clients always refused with 403 (waiting will not help): same forms as `allowList`, and raw API keys. */
  denyList?: readonly string[] | ((req: Req, key: string) => Awaitable<boolean>);
  /** `true` is `'draft-6'`, as in express-rate-limit. @default 'draft-10' */
  standardHeaders?: StandardHeaders | boolean;
  /** `X-RateLimit-Limit`, `-Remaining` and `-Reset` (Unix time in seconds). @default false */
  legacyHeaders?: boolean;
  /**
   * Leave `remaining` out of the headers (public routes: an exact count tells abusers when to stop);
   * `true`, route patterns, or a function of the request.
   * @default false
   */
  hideRemaining?: boolean | readonly string[] | ((req: Req) => boolean);
  /** @default 429 */
  statusCode?: number;
  /** @default 'json' */
  responseFormat?: ResponseFormat;
  /** The refusal's message, or a function of the request and its `RateLimitInfo`. @default says when to retry */
  message?: string | ((req: Req, info: RateLimitInfo) => string);
  /**
   * When the limiter's store fails: `true` lets the request through (fail open), `false` answers
   * 503 with `Retry-After: 1` (fail closed). Either way `onError` hears about it.
   * @default false
   */
  passOnStoreError?: boolean;
  /** Called for every request the enforced rules let through. */
  onExceeding?: (req: Req, info: RateLimitInfo) => void;
  /** Called for every request refused for being over a limit. */
  onExceeded?: (req: Req, info: RateLimitInfo) => void;
  /** Called when a shadow (or not yet enforced) rule would have refused. */
  onShadowExceeded?: (req: Req, info: RateLimitInfo) => void;
  /** Store failures, bad `cost` results, and exceptions thrown by the callbacks above. @default process.emitWarning */
  onError?: (error: unknown, req: Req) => void;
  /**
   * Clock in ms for absolute reset times (`resetTime`, `X-RateLimit-Reset`).
   * @default a tokenlease limiter's own clock, as it read it for the decision (`Date.now` for another limiter)
   */
  now?: () => number;
}

/** One rule's part in a decision. */
export interface RuleResult {
  name: string;
  policy: string;
  key: string;
  cost: number;
  /** False for shadow rules and for clients outside the rule's `enforce` percentage. */
  enforced: boolean;
  /** Undefined when the rule was not evaluated (a shadow rule of a refused request). */
  decision: Decision | undefined;
}

/** What the limiter decided for a request; `req.rateLimit` in Express and Fastify. */
export interface RateLimitInfo {
  /** Whether the request goes through (shadow refusals never stop it). */
  allowed: boolean;
  /** The client identity. */
  key: string;
  /** The client's plan, with a plans file. */
  plan: string | undefined;
  /** The rule reported in single-limit headers: the one that refused, or the closest to refusing. */
  policy: string;
  limit: number;
  /** Tokens of the reported rule's limit spent, this request included (refused or not). */
  used: number;
  /** `used`, hidden from iteration and JSON (express-rate-limit's deprecated name). */
  readonly current?: number;
  remaining: number;
  /** When the reported rule is fully replenished. */
  resetTime: Date;
  retryAfterMs: number;
  rules: RuleResult[];
  /** Names of shadow rules that would have refused this request. */
  shadowExceeded: string[];
}

type Header = [name: string, value: string];

/** What an adapter does with a request. */
export type Outcome =
  | { action: 'next'; headers: Header[]; info: RateLimitInfo | undefined }
  | ({
      action: 'refuse';
      /** `limited`: over a limit (429); `denied`: on the deny list (403); `unavailable`: store failed (503). */
      reason: 'limited' | 'denied' | 'unavailable';
      status: number;
      headers: Header[];
      info: RateLimitInfo | undefined;
      /** Seconds until the request can pass; undefined if it never can (or was deny-listed). */
      retryAfter: number | undefined;
    } & RefusalBody);

const NOTHING: Outcome = { action: 'next', headers: [], info: undefined };
const NO_FACTS: HeaderFacts = { windowSeconds: 0, resetsAtEnd: false };
const GLOBAL = keyPart('global', '*');

/**
 * Every `RateLimitInfo`: `current` (express-rate-limit's old name of `used`) is a getter of the
 * class, hidden from iteration and JSON as express-rate-limit hides it, without defining a
 * property on every request's object (that cost more than building the rest). A class, so that
 * the fields are one allocation: added one by one to an `Object.create` of a prototype they
 * outgrew its room, and each growth copied them (about 0.3 KB of garbage per request).
 */
class Info implements RateLimitInfo {
  constructor(
    public allowed: boolean,
    public key: string,
    public plan: string | undefined,
    public policy: string,
    public limit: number,
    public used: number,
    public remaining: number,
    public resetTime: Date,
    public retryAfterMs: number,
    public rules: RuleResult[],
    public shadowExceeded: string[],
  ) {}

  get current(): number {
    return this.used;
  }
}

/** A `RateLimitInfo` of these fields, with `current` as every one has it. */
export function rateLimitInfo(f: Omit<RateLimitInfo, 'current'>): RateLimitInfo {
  return new Info(
    f.allowed,
    f.key,
    f.plan,
    f.policy,
    f.limit,
    f.used,
    f.remaining,
    f.resetTime,
    f.retryAfterMs,
    f.rules,
    f.shadowExceeded,
  );
}

/** What identifies the sender of a request, read once per request. */
interface Identity {
  apiKey: string | undefined;
  ip: string | undefined;
  /** `ip` as a key part's value: IPv6 grouped by prefix. */
  ipKey: string;
  /** The key part itself, `ip=…`. */
  ipPart: string;
  client: string;
  plan: string | undefined;
  /** The API key when the plans file lists it: a key the operator issued, not just any header. */
  listedApiKey: string | undefined;
}

/** What is known of a request before the limiter decides it. */
interface Asked<Req> {
  req: Req;
  view: RequestView;
  /** The rule set it is decided under (a plans file may swap it between requests). */
  set: RuleSet<Req>;
  ids: Identity;
  user: string | undefined;
  /** The cost the options give it, if they give one (else the route's). */
  cost: number | undefined;
}

/** The rules a request meets, in rule order. */
interface Plan<Req> {
  /** Each rule's part in the decision, as `RateLimitInfo.rules` shows it. */
  results: RuleResult[];
  /** The rules of `results`, in the same order. */
  rules: readonly CompiledRule<Req>[];
  /**
   * Their policies' windows and how they reset, read before `consume` (a plans reload may remove
   * a policy after); `NO_FACTS` without standard headers, the only ones that show a window.
   */
  facts: HeaderFacts[];
  /** The request's route as the limiter's observers hear it; undefined when nobody does. */
  route: string | undefined;
  /** How many of `results` are not enforced (shadow, or not enforced for this client). */
  shadowed: number;
}

/**
 * The framework-agnostic middleware: decides a request and says what to send. Adapters turn a
 * framework request into a `RequestView` and apply the `Outcome`.
 */
export class RateLimitCore<Req> {
  readonly #o: RateLimitOptions<Req>;
  readonly #view: (req: Req) => RequestView;
  readonly #ip: ClientIp;
  readonly #static: RuleSet<Req> | undefined;
  readonly #apiKeyHeader: string;
  readonly #hide: ((req: Req, view: RequestView) => boolean) | undefined;
  /**
   * The time a decision was made at (`fresh`: it came from the store), which absolute reset times
   * count from: the `now` option's, else a tokenlease limiter's clock as its decision read it.
   */
  readonly #decidedAt: (fresh: boolean) => number;
  readonly #allow: ClientList;
  readonly #deny: ClientList;
  readonly #standard: StandardHeaders | false;
  /** What `#outcome` passes `rateLimitHeaders`; `hideRemaining` and `now` are the request's. */
  readonly #headerOptions: HeaderOptions;
  /**
   * `#readsApiKey` of the rule set last asked about: a set is swapped only when a plans file
   * reloads, and a WeakMap lookup per request cost more than the answer.
   */
  #apiKeyReader: { set: RuleSet<Req> | undefined; reads: boolean } = { set: undefined, reads: false };
  /** Options whose answers `check` waits for before deciding: `skip`, allow/deny functions. */
  readonly #awaits: boolean;
  /**
   * Whether the limiter's observers hear decisions, the only place a check's `route` goes: without
   * them the route is worked out only for a rule keyed by it.
   */
  readonly #observed: boolean;
  /**
   * The limiter's consume of one rule and of checks: answering in this turn on lease hits when the
   * limiter is a tokenlease one (a stand-in with only `consume` answers with a promise).
   */
  readonly #consumeOne: (policy: string, key: string, cost: number) => Decision | Promise<Decision>;
  readonly #consumeChecks: (checks: readonly Check[]) => Decision | Promise<Decision>;
  /** The limiter's `describe(policy)` window and how it resets, with no object per call from a tokenlease one. */
  readonly #factsOf: (policy: string) => HeaderFacts;
  #lastIp = { ipKey: '', part: '' };
  #lastRoute: { method: string; pattern: string | undefined; path: string; route: string } = {
    method: '',
    pattern: undefined,
    path: '',
    route: '',
  };

  constructor(options: RateLimitOptions<Req>, view: (req: Req) => RequestView) {
    if (typeof options !== 'object' || options === null)
      throw new ConfigError('options', 'expected an object');
    const o = options;
    if (typeof o.limiter?.consume !== 'function' || typeof o.limiter.describe !== 'function') {
      throw new ConfigError('limiter', 'expected a tokenlease Limiter');
    }
    this.#o = o;
    this.#view = view;
    // A limiter that does not say (not a tokenlease one) is taken to have observers.
    this.#observed = o.limiter.observesDecisions !== false;
    const limiter = o.limiter;
    const now = o.now;
    if (typeof limiter[consumeNow] === 'function' && typeof limiter[headerFacts] === 'function') {
      this.#consumeOne = (policy, key, cost) => limiter[consumeNow](policy, key, cost);
      this.#consumeChecks = (checks) => limiter[consumeNow](checks);
      this.#factsOf = (policy) => limiter[headerFacts](policy);
      this.#decidedAt = now ?? ((fresh) => limiter[decidedAt](fresh));
    } else {
      this.#decidedAt = now ?? Date.now;
      this.#consumeOne = (policy, key, cost) => limiter.consume(policy, key, cost);
      this.#consumeChecks = (checks) => limiter.consume(checks);
      this.#factsOf = (policy) => ({
        windowSeconds: limiter.describe(policy).windowSeconds,
        resetsAtEnd: false,
      });
    }
    this.#ip = new ClientIp({ trustProxy: o.trustProxy, ipv6Subnet: o.ipv6Subnet });
    this.#standard = standardHeadersOption(o.standardHeaders, 'draft-10');
    this.#headerOptions = {
      standard: this.#standard,
      legacy: o.legacyHeaders ?? false,
      hideRemaining: false,
      now: 0,
    };
    this.#apiKeyHeader = headerName(o.apiKeyHeader ?? 'x-api-key', 'apiKeyHeader');
    if (o.plans !== undefined) {
      if (o.rules !== undefined || o.costs !== undefined) {
        throw new ConfigError(
          o.rules !== undefined ? 'rules' : 'costs',
          'with `plans`, put rules and costs in the plans file',
        );
      }
      for (const policy of Object.keys(o.plans.policies)) {
        if (!hasPolicy(o.limiter, policy)) {
          throw new ConfigError(
            'limiter',
            `has no policy ${JSON.stringify(policy)} of the plans; create it with \`policies: plans.policies\``,
          );
        }
      }
    } else {
      if (!Array.isArray(o.rules) || o.rules.length === 0) {
        throw new ConfigError(
          'rules',
          'expected at least one rule, e.g. [{ policy: "per-client" }] (or pass `plans`)',
        );
      }
      const rules = o.rules.map((r, i) => compileRule<Req>(r, `rules[${i}]`));
      for (const [i, r] of rules.entries()) {
        if (!hasPolicy(o.limiter, r.policy)) {
          throw new ConfigError(
            `rules[${i}].policy`,
            `the limiter has no policy ${JSON.stringify(r.policy)}`,
          );
        }
      }
      this.#static = {
        rules,
        plans: new Map(),
        keys: new Map(),
        defaultPlan: undefined,
        costs: compileCosts(o.costs, 'costs'),
        allow: new ClientList([], 'allowList'),
        deny: new ClientList([], 'denyList'),
      };
    }
    this.#hide = compileHide(o.hideRemaining);
    checkOptionTypes(o);
    const cost = o.cost;
    if (
      cost !== undefined &&
      typeof cost !== 'function' &&
      !(typeof cost === 'number' && cost > 0 && Number.isFinite(cost))
    ) {
      throw new ConfigError(
        'cost',
        `expected a positive number or a function of the request, got ${String(cost)}`,
      );
    }
    const status = o.statusCode ?? 429;
    if (!Number.isInteger(status) || status < 400 || status > 599) {
      throw new ConfigError('statusCode', `expected an HTTP error status (400-599), got ${String(status)}`);
    }
    const format = o.responseFormat ?? 'json';
    if (format !== 'json' && format !== 'problem+json') {
      throw new ConfigError('responseFormat', `expected 'json' or 'problem+json', got ${shown(format)}`);
    }
    this.#awaits = Boolean(o.skip) || typeof o.allowList === 'function' || typeof o.denyList === 'function';
    this.#allow = new ClientList(typeof o.allowList === 'function' ? [] : o.allowList, 'allowList');
    this.#deny = new ClientList(typeof o.denyList === 'function' ? [] : o.denyList, 'denyList');
  }

  /**
   * Decides one request. Rejects only when a callback of the options throws (`keyGenerator`,
   * `skip`, `user`, allow/deny functions); store failures become an outcome.
   */
  check(req: Req): Promise<Outcome> {
    const outcome = this.checkThen(req, unchanged, undefined);
    return outcome instanceof Promise ? outcome : Promise.resolve(outcome);
  }

  /**
   * `check(req).then(then)` in one step, and in this turn when nothing waits (a lease hit, a
   * deny-listed client): the adapters apply the outcome in the callback that receives the
   * limiter's answer, with no promise or turn of the microtask queue per request of their own.
   * Returns what `then` returns, or its promise when something was waited for; rejects (never
   * throws) when a callback of the options or `then` throws. `then` is given the request and
   * `ctx` (the response) back, so that an adapter's is one function, not a closure per request.
   */
  checkThen<T, C>(req: Req, then: Then<Req, C, T>, ctx: C): T | Promise<T> {
    if (this.#awaits) return this.#checkAwaiting(req).then((outcome) => then(outcome, req, ctx));
    // Nothing to wait for but perhaps the client key: no promise but the limiter's, when it is sync.
    try {
      const view = this.#view(req);
      const custom = this.#o.keyGenerator?.(req);
      if (isThenable(custom)) {
        return Promise.resolve(custom).then((c) => this.#identified(req, view, c, then, ctx));
      }
      return this.#identified(req, view, custom, then, ctx);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /** `check` with `skip` or allow/deny functions, whose answers it waits for. */
  async #checkAwaiting(req: Req): Promise<Outcome> {
    const o = this.#o;
    if (o.skip && (await o.skip(req))) return NOTHING;
    const view = this.#view(req);
    const custom = o.keyGenerator ? await o.keyGenerator(req) : undefined;
    const user = o.user?.(req);
    const seen = this.#ruleSet();
    const provisional = this.#identify(view, seen, custom);
    const allowFn = typeof o.allowList === 'function' && (await o.allowList(req, provisional.client));
    const denyFn = typeof o.denyList === 'function' && (await o.denyList(req, provisional.client));
    const cost = this.#cost(req);
    // From here to consume() nothing awaits, so a plans reload cannot swap policies underneath.
    const set = this.#ruleSet();
    const ids = set === seen ? provisional : this.#identify(view, set, custom);
    if (denyFn || this.#denied(set, ids)) return this.#forbidden();
    if (allowFn) return NOTHING;
    return this.#decide({ req, view, set, ids, user, cost }, unchanged, undefined);
  }

  /** `check` once the client key is known, with nothing to wait for before the limiter. */
  #identified<T, C>(
    req: Req,
    view: RequestView,
    custom: string | number | undefined,
    then: Then<Req, C, T>,
    ctx: C,
  ): T | Promise<T> {
    const user = this.#o.user?.(req);
    const set = this.#ruleSet();
    const ids = this.#identify(view, set, custom);
    const cost = this.#cost(req);
    if (this.#denied(set, ids)) return then(this.#forbidden(), req, ctx);
    return this.#decide({ req, view, set, ids, user, cost }, then, ctx);
  }

  /**
   * Who sent the request, as far as the request itself says (and `set` asks), and who the client
   * is under `set` (which decides whether its API key is listed).
   */
  #identify(view: RequestView, set: RuleSet<Req>, custom: string | number | undefined): Identity {
    // Without our own trustProxy, the framework's resolved address (its trust proxy setting) counts.
    const resolved = this.#o.trustProxy === undefined ? view.clientAddress : undefined;
    const ip =
      resolved !== undefined
        ? (parseHop(resolved) ?? parseHop(view.remoteAddress))
        : this.#ip.address(view.remoteAddress, view.headers['x-forwarded-for']);
    const ipKey = ip === undefined ? 'unknown' : this.#ip.group(ip);
    const apiKey = this.#readsApiKey(set) ? readApiKey(view.headers, this.#apiKeyHeader) : undefined;
    const ipPart = this.#ipPart(ipKey);
    const listed = apiKey !== undefined ? set.keys.get(apiKey) : undefined;
    const client =
      typeof custom === 'string'
        ? custom
        : typeof custom === 'number' && Number.isFinite(custom)
          ? String(custom)
          : listed !== undefined
            ? `apiKey=${apiKey}`
            : ipPart;
    return {
      apiKey,
      ip,
      ipKey,
      ipPart,
      client,
      plan: listed ?? set.defaultPlan,
      listedApiKey: listed !== undefined ? apiKey : undefined,
    };
  }

  /**
   * Whether anything under `set` looks at the API key: plans, allow or deny lists, a rule by
   * `apiKey`. Otherwise the header is not read (an Express request's `headers` is a lookup of its own).
   */
  #readsApiKey(set: RuleSet<Req>): boolean {
    if (this.#apiKeyReader.set !== set) {
      const byApiKey = (rules: readonly CompiledRule<Req>[]) => rules.some((r) => r.by.includes('apiKey'));
      const reads =
        set.keys.size > 0 ||
        set.allow.size + set.deny.size + this.#allow.size + this.#deny.size > 0 ||
        byApiKey(set.rules) ||
        [...set.plans.values()].some(byApiKey);
      this.#apiKeyReader = { set, reads };
    }
    return this.#apiKeyReader.reads;
  }

  #denied(set: RuleSet<Req>, ids: Identity): boolean {
    return set.deny.has(ids) || this.#deny.has(ids);
  }

  /** The limiter's answer for a client that is not deny-listed (nor allowed by a function). */
  #decide<T, C>(asked: Asked<Req>, then: Then<Req, C, T>, ctx: C): T | Promise<T> {
    const { req, view, set, ids } = asked;
    if ((set.allow.size > 0 || this.#allow.size > 0) && this.#allowed(set, ids))
      return then(NOTHING, req, ctx);
    let plan: Plan<Req>;
    let decided: Decision | Promise<Decision> | undefined;
    try {
      plan = this.#plan(asked);
      const enforced = plan.results.length - plan.shadowed;
      // One check and nobody to hear its route: the limiter's one-rule call, which skips the checks'
      // own validation and copy (and no `Check` is built).
      if (enforced === 1 && !this.#observed) {
        const only = plan.shadowed === 0 ? plan.results[0]! : plan.results.find((r) => r.enforced)!;
        decided = this.#consumeOne(only.policy, only.key, only.cost);
      } else if (enforced > 0) decided = this.#consumeChecks(checksOf(plan, true));
    } catch (err) {
      return then(this.#failed(err, req), req, ctx);
    }
    if (!(decided instanceof Promise)) {
      // Without an enforced rule the limiter was not asked: nothing read its clock for this request.
      return settle(this.#shadowed(req, view, ids, plan, decided, decided === undefined), then, req, ctx);
    }
    return decided.then(
      (decision) => settle(this.#shadowed(req, view, ids, plan, decision, true), then, req, ctx),
      (err: unknown) => then(this.#failed(err, req), req, ctx),
    );
  }

  /**
   * A failing store, a `by` function that threw, or a policy removed from the limiter while a rule
   * still names it: the same answer as a store failure, never a 500.
   */
  #failed(err: unknown, req: Req): Outcome {
    this.#report(err, req);
    return this.#o.passOnStoreError ? NOTHING : this.#unavailable();
  }

  /**
   * The outcome once the enforced rules are decided, after deciding the shadow rules when any.
   * `fresh`: the decision was not made in this call (it came from the store), so the limiter's
   * clock is read again for it.
   */
  #shadowed(
    req: Req,
    view: RequestView,
    ids: Identity,
    plan: Plan<Req>,
    decision: Decision | undefined,
    fresh: boolean,
  ): Outcome | Promise<Outcome> {
    const { results } = plan;
    if (results.length === 0) return NOTHING;
    // Before the shadow rules' consume, which is another decision.
    const now = this.#decidedAt(fresh);
    // A one-rule call's decision has no `checks`: it is that rule's.
    const decided = decision?.checks;
    let next = 0;
    for (const r of results) if (r.enforced) r.decision = decided === undefined ? decision : decided[next++];
    if (plan.shadowed === 0 || decision?.allowed === false) return this.#outcome(req, view, ids, plan, now);
    // All-or-nothing among shadow rules too: what enforcing them would have counted.
    return this.#o.limiter.consume(checksOf(plan, false)).then(
      (d) => {
        next = 0;
        for (const r of results) if (!r.enforced) r.decision = d.checks?.[next++];
        return this.#outcome(req, view, ids, plan, now);
      },
      (err: unknown) => {
        this.#report(err, req);
        return this.#outcome(req, view, ids, plan, now);
      },
    );
  }

  /** The rules this request meets, as limiter checks split into enforced and shadow. */
  #plan({ req, view, set, ids, user, cost }: Asked<Req>): Plan<Req> {
    const planRules = ids.plan === undefined ? undefined : set.plans.get(ids.plan);
    const all = planRules === undefined || planRules.length === 0 ? set.rules : [...set.rules, ...planRules];
    // Split only if a route table is consulted: a rule's routes, or costs without a cost given.
    let paths: SplitPaths | undefined;
    let routeCost = 1;
    if (cost === undefined && set.costs.size > 0) {
      paths = new SplitPaths([view.routePattern, view.path]);
      routeCost = set.costs.match(view.method, paths)?.value ?? 1;
    }
    const route = this.#observed ? this.#route(view) : undefined;
    // Sized once (and cut if routes leave rules out): an array grown by push gets room for 16.
    const results: RuleResult[] = new Array(all.length);
    const facts: HeaderFacts[] = new Array(all.length);
    let count = 0;
    let shadowed = 0;
    // The rules met, copied only once a rule's routes leave one out.
    let met: CompiledRule<Req>[] | undefined;
    for (let r = 0; r < all.length; r++) {
      const rule = all[r]!;
      let routeMatch: { pattern: string } | undefined;
      if (rule.routes) {
        paths ??= new SplitPaths([view.routePattern, view.path]);
        routeMatch = rule.routes.match(view.method, paths);
        if (!routeMatch) {
          met ??= all.slice(0, r);
          continue;
        }
      }
      met?.push(rule);
      const keyRoute = routeMatch?.pattern ?? route;
      let key = '';
      for (let i = 0; i < rule.by.length; i++) {
        const part = this.#part(rule.by[i]!, i, req, view, ids, user, keyRoute);
        key = key === '' ? part : `${key}&${part}`;
      }
      const ruleCost = rule.weighted ? (cost ?? routeCost) : 1;
      const enforced = isEnforced(rule, ids.client);
      results[count] = {
        name: rule.name,
        policy: rule.policy,
        key,
        cost: ruleCost,
        enforced,
        decision: undefined,
      };
      // Legacy headers alone (express-rate-limit's default) show no window: no describe(), a clock
      // read and an object per rule and request.
      facts[count] = this.#standard === false ? NO_FACTS : this.#factsOf(rule.policy);
      count++;
      if (!enforced) shadowed++;
    }
    if (count < all.length) {
      results.length = count;
      facts.length = count;
    }
    return { results, rules: met ?? all, facts, route, shadowed };
  }

  /** `now`: when the enforced rules were decided, in ms. */
  #outcome(req: Req, view: RequestView, ids: Identity, plan: Plan<Req>, now: number): Outcome {
    const o = this.#o;
    const { results } = plan;
    // No intermediate arrays, and `states` sized once (an array grown by push gets room for 16):
    // this runs for every request.
    let decided = 0;
    for (const r of results) if (r.enforced && r.decision !== undefined) decided++;
    const states: RuleState[] = new Array(decided);
    decided = 0;
    const shadowExceeded: string[] = [];
    let refused = false;
    // The enforced rule single-limit headers report (see `reported`), and its state.
    let primaryResult: RuleResult | undefined;
    let primaryState: RuleState | undefined;
    for (let i = 0; i < results.length; i++) {
      const r = results[i]!;
      if (r.enforced) {
        if (r.decision === undefined) continue;
        // A rule by client alone is partitioned by the client key itself (as express-rate-limit hashes it).
        const s = state(r, plan.facts[i]!.windowSeconds, plan.rules[i]!.clientOnly ? ids.client : r.key);
        states[decided++] = s;
        if (!r.decision.allowed) refused = true;
        if (primaryResult === undefined || reported(r, primaryResult)) {
          primaryResult = r;
          primaryState = s;
        }
      } else if (r.decision?.allowed === false) shadowExceeded.push(r.name);
    }
    primaryResult ??= primary(results.filter((r) => r.decision));
    const retryAfter = refused ? retryAfterSeconds(states) : undefined;
    if (retryAfter !== undefined) {
      // t of a rule that did not refuse never points past Retry-After: by then a bucket or a sliding
      // window has refilled some. A fixed window's stays: it gives back nothing until it ends.
      let k = 0;
      for (let i = 0; i < results.length; i++) {
        const r = results[i]!;
        if (!r.enforced || r.decision === undefined) continue;
        const s = states[k++]!;
        if (!s.violated && !plan.facts[i]!.resetsAtEnd && s.resetSeconds! > retryAfter) {
          s.resetSeconds = retryAfter;
        }
      }
    }
    if (primaryResult === undefined) return NOTHING;
    const d = primaryResult.decision!;
    const used = Math.max(0, d.limit - d.remaining) + (d.allowed ? 0 : primaryResult.cost);
    const info = new Info(
      !refused,
      ids.client,
      ids.plan,
      primaryResult.name,
      d.limit,
      used,
      d.remaining,
      new Date(now + d.resetMs),
      d.retryAfterMs,
      results,
      shadowExceeded,
    );
    // The core's one options object, set just before the call that reads it (nothing runs between
    // them: `#hide` is asked first), not an object per request.
    const hideRemaining = this.#hide?.(req, view) ?? false;
    const headerOptions = this.#headerOptions;
    headerOptions.hideRemaining = hideRemaining;
    headerOptions.now = now;
    const headers = primaryState ? rateLimitHeaders(states, primaryState, headerOptions) : [];
    if (shadowExceeded.length > 0) this.#call(o.onShadowExceeded, req, info);
    if (!refused) {
      if (states.length > 0) this.#call(o.onExceeding, req, info);
      return { action: 'next', headers, info };
    }
    this.#call(o.onExceeded, req, info);
    // As express-rate-limit: with every rate-limit header off, Retry-After is off too.
    const anyHeaders = this.#standard !== false || headerOptions.legacy;
    if (retryAfter !== undefined && anyHeaders) headers.push(['Retry-After', String(retryAfter)]);
    const violated = states.filter((s) => s.violated).map((s) => s.name);
    const status = o.statusCode ?? 429;
    const message =
      typeof o.message === 'function'
        ? o.message(req, info)
        : (o.message ?? refusalMessage(violated, retryAfter));
    const body = refusalBody(o.responseFormat ?? 'json', status, message, violated, retryAfter);
    return { action: 'refuse', reason: 'limited', status, headers, info, retryAfter, ...body };
  }

  /**
   * Allow-listing is a privilege, so a key entry matches only an identity someone vouched for: the
   * client key (keyGenerator's, a listed API key, the IP) or an API key the plans file lists —
   * never a raw header any client can send. Deny lists match the raw header too.
   */
  #allowed(set: RuleSet<Req>, ids: Identity): boolean {
    const vouched = { client: ids.client, apiKey: ids.listedApiKey, ip: ids.ip };
    return set.allow.has(vouched) || this.#allow.has(vouched);
  }

  #ruleSet(): RuleSet<Req> {
    return this.#static ?? (this.#o.plans!.ruleSet() as RuleSet<Req>);
  }

  /** `route`: the rule's matched route pattern, or the request's when already worked out. */
  #part(
    part: KeyPart<Req>,
    index: number,
    req: Req,
    view: RequestView,
    ids: Identity,
    user: string | undefined,
    route: string | undefined,
  ): string {
    switch (part) {
      case 'client':
        return keyPart('client', ids.client);
      case 'apiKey':
        return ids.apiKey === undefined ? ids.ipPart : keyPart('apiKey', ids.apiKey);
      case 'user':
        return typeof user === 'string' && user.length > 0 ? keyPart('user', user) : ids.ipPart;
      case 'ip':
        return ids.ipPart;
      case 'route':
        return keyPart('route', route ?? this.#route(view));
      case 'global':
        return GLOBAL;
      default: {
        const value = part(req);
        return typeof value === 'string' ? keyPart(`fn${index}`, value) : ids.ipPart;
      }
    }
  }

  /**
   * `ip=…` of an address key, the last one kept: a busy client's requests share one string, so
   * the limiter's table hashes it once, not once per request.
   */
  #ipPart(ipKey: string): string {
    if (ipKey !== this.#lastIp.ipKey) this.#lastIp = { ipKey, part: keyPart('ip', ipKey) };
    return this.#lastIp.part;
  }

  /**
   * The route of a request as observers see it (`GET /users/:id`), the last one kept: a busy
   * client asks for the same route again and again.
   */
  #route(view: RequestView): string {
    const last = this.#lastRoute;
    if (view.method === last.method && view.routePattern === last.pattern && view.path === last.path) {
      return last.route;
    }
    // HEAD runs the GET handler (Express, Fastify), so it shares the GET route's bucket.
    const upper = view.method.toUpperCase();
    const route = `${upper === 'HEAD' ? 'GET' : upper} ${view.routePattern ?? normalizePath(view.path)}`;
    this.#lastRoute = { method: view.method, pattern: view.routePattern, path: view.path, route };
    return route;
  }

  #cost(req: Req): number | undefined {
    const cost = this.#o.cost;
    if (cost === undefined || typeof cost === 'number') return cost;
    const value = cost(req);
    if (typeof value === 'number' && Number.isFinite(value) && value > 0) return value;
    this.#report(
      new ConfigError('cost', `expected the cost function to return a positive number, got ${String(value)}`),
      req,
    );
    return 1;
  }

  #forbidden(): Outcome {
    return {
      action: 'refuse',
      reason: 'denied',
      status: 403,
      headers: [],
      info: undefined,
      retryAfter: undefined,
      ...forbiddenBody(),
    };
  }

  #unavailable(): Outcome {
    return {
      action: 'refuse',
      reason: 'unavailable',
      status: 503,
      headers: [['Retry-After', '1']],
      info: undefined,
      retryAfter: 1,
      ...unavailableBody(),
    };
  }

  #call(fn: ((req: Req, info: RateLimitInfo) => void) | undefined, req: Req, info: RateLimitInfo): void {
    if (!fn) return;
    try {
      fn(req, info);
    } catch (err) {
      this.#report(err, req);
    }
  }

  #report(err: unknown, req: Req): void {
    if (this.#o.onError) this.#o.onError(err, req);
    else
      process.emitWarning(err instanceof Error ? err : new Error(String(err)), { code: 'TOKENLEASE_HTTP' });
  }
}

/** What an adapter does with an outcome: `checkThen`'s `then`, given the request and its `ctx` back. */
export type Then<Req, C, T> = (outcome: Outcome, req: Req, ctx: C) => T;

const unchanged = (outcome: Outcome) => outcome;

/** `then` of an outcome that may still be coming (shadow rules wait for a second decision). */
function settle<Req, C, T>(
  outcome: Outcome | Promise<Outcome>,
  then: Then<Req, C, T>,
  req: Req,
  ctx: C,
): T | Promise<T> {
  return isThenable(outcome) ? outcome.then((o) => then(o, req, ctx)) : then(outcome, req, ctx);
}

function isThenable<T>(value: T | PromiseLike<T>): value is PromiseLike<T> {
  return typeof (value as { then?: unknown } | null | undefined)?.then === 'function';
}

function hasPolicy(limiter: Limiter, policy: string): boolean {
  try {
    limiter.describe(policy);
    return true;
  } catch {
    return false;
  }
}

/**
 * The limiter checks of a plan's enforced rules (or, with `enforced` false, of the others), in rule
 * order. `route` and `shadow` only reach the limiter's observers (metrics, logs, alerts).
 */
function checksOf<Req>(plan: Plan<Req>, enforced: boolean): Check[] {
  const { results, route } = plan;
  const checks: Check[] = new Array(enforced ? results.length - plan.shadowed : plan.shadowed);
  let next = 0;
  for (const r of results) {
    if (r.enforced === enforced) {
      checks[next++] = { policy: r.policy, key: r.key, cost: r.cost, route, shadow: !r.enforced };
    }
  }
  return checks;
}

/** `partition`: what draft-8 headers hash into the partition key. */
function state(r: RuleResult, windowSeconds: number, partition: string): RuleState {
  const d = r.decision!;
  const violated = !d.allowed;
  const ms = violated ? d.retryAfterMs : d.resetMs;
  return {
    name: r.name,
    key: partition,
    limit: d.limit,
    windowSeconds,
    remaining: violated ? 0 : d.remaining,
    resetSeconds: Number.isFinite(ms) ? Math.ceil(ms / 1000) : undefined,
    violated,
  };
}

/**
 * Whether single-limit headers report `r` rather than `than` (both decided): the refusing rule
 * that frees up last, else the one closest to its limit; the earlier one on a tie.
 */
function reported(r: RuleResult, than: RuleResult): boolean {
  const d = r.decision!;
  const e = than.decision!;
  if (d.allowed !== e.allowed) return !d.allowed;
  return d.allowed ? d.remaining / d.limit < e.remaining / e.limit : d.retryAfterMs > e.retryAfterMs;
}

/** The rule of `results` (all decided) single-limit headers report; see `reported`. */
function primary(results: readonly RuleResult[]): RuleResult | undefined {
  let chosen: RuleResult | undefined;
  for (const r of results) if (chosen === undefined || reported(r, chosen)) chosen = r;
  return chosen;
}

/** Options read per request: a wrong type is refused here, not failed on every request. */
function checkOptionTypes<Req>(o: RateLimitOptions<Req>): void {
  for (const name of ['legacyHeaders', 'passOnStoreError'] as const) {
    const value = o[name];
    if (value !== undefined && typeof value !== 'boolean') {
      throw new ConfigError(name, `expected true or false, got ${shown(value)}`);
    }
  }
  const functions = [
    'keyGenerator',
    'skip',
    'user',
    'onExceeding',
    'onExceeded',
    'onShadowExceeded',
    'onError',
  ];
  for (const name of functions as (keyof RateLimitOptions<Req>)[]) {
    const value = o[name];
    if (value !== undefined && typeof value !== 'function') {
      throw new ConfigError(name, `expected a function, got ${shown(value)}`);
    }
  }
  if (o.message !== undefined && typeof o.message !== 'string' && typeof o.message !== 'function') {
    throw new ConfigError(
      'message',
      `expected a string or a function of the request, got ${shown(o.message)}`,
    );
  }
}

function compileHide<Req>(
  hide: RateLimitOptions<Req>['hideRemaining'],
): ((req: Req, view: RequestView) => boolean) | undefined {
  if (hide === undefined || hide === false) return undefined;
  if (hide === true) return () => true;
  if (typeof hide === 'function') return (req) => hide(req);
  if (!Array.isArray(hide)) {
    throw new ConfigError('hideRemaining', 'expected true, false, a list of route patterns or a function');
  }
  const table = new RouteTable(
    hide.map((p) => [p, true] as const),
    'hideRemaining',
  );
  return (_req, view) => table.match(view.method, [view.routePattern, view.path]) !== undefined;
}

/** A header name option (an RFC 9110 token), lower-cased as Node keys the headers it received. */
function headerName(value: unknown, field: string): string {
  if (typeof value !== 'string' || !/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(value)) {
    throw new ConfigError(field, `expected a header name such as 'x-api-key', got ${shown(value)}`);
  }
  return value.toLowerCase();
}
