import { ConfigError, shown } from '../errors.js';
import { isOptionsObject, knownOptions } from '../options.js';
import { IpRanges, normalize } from './clientIp.js';
import { RouteTable } from './routes.js';

/**
 * What a rule counts per. Parts combine: `['client', 'route']` is one bucket per client per route.
 * - `'client'`: the client identity (`keyGenerator`; with a plans file, the listed API key, or the IP).
 * - `'apiKey'`: the API key header. `'user'`: the `user` resolver (the authenticated user).
 *   A request without one is counted by its IP instead: never unlimited, never one shared bucket.
 * - `'ip'`: the client IP (trusted proxies honoured, IPv6 grouped by prefix).
 * - `'route'`: the matched route pattern (one of `routes`, or the framework's, or the path).
 * - `'global'`: one bucket for everyone (e.g. protecting a fragile endpoint).
 * - a function of the request returning a string (or undefined: counted by IP).
 */
export type KeyPart<Req> = KeyPartName | ((req: Req) => string | undefined);
export type KeyPartName = 'client' | 'apiKey' | 'user' | 'ip' | 'route' | 'global';

export const KEY_PARTS: readonly KeyPartName[] = ['client', 'apiKey', 'user', 'ip', 'route', 'global'];

/** One limit applied to matching requests. */
export interface RuleOptions<Req> {
  /** The limiter policy this rule takes tokens from. */
  policy: string;
  /**
   * The name clients see in `RateLimit` headers and `violated-policies`.
   * @default policy
   */
  name?: string;
  /** @default 'client' */
  by?: KeyPart<Req> | readonly KeyPart<Req>[];
  /**
   * Only requests on these route patterns count (`'POST /reports'`, `'/search/*'`).
   * @default every route
   */
  routes?: readonly string[];
  /**
   * `false` counts every request as 1 here, whatever the route's cost (e.g. a daily request quota
   * next to a weighted per-second limit).
   * @default true
   */
  weighted?: boolean;
  /**
   * Dry run: the rule decides and reports (`onShadowExceeded`, `req.rateLimit.shadowExceeded`) but
   * never refuses, and stays out of the response headers.
   * @default false
   */
  shadow?: boolean;
  /**
   * Percentage of clients (0-100, by a stable hash of the client key) for whom the rule refuses;
   * for the others it runs as in `shadow`. Raise it step by step to switch blocking on gradually.
   * @default 100
   */
  enforce?: number;
}

export interface CompiledRule<Req> {
  readonly name: string;
  readonly policy: string;
  readonly by: readonly KeyPart<Req>[];
  /** `by` is the client alone: the rule's key is the client key's (`client=…`). */
  readonly clientOnly: boolean;
  readonly routes: RouteTable<true> | undefined;
  readonly weighted: boolean;
  readonly shadow: boolean;
  readonly enforce: number;
}

/** Names go into quoted header strings: printable ASCII only. */
const NAME = /^[\x20-\x7e]{1,128}$/;

/** Validates one rule; `field` names it in errors (`rules[0]`, `plans.pro.rules.per-key`). */
const RULE_FIELDS: readonly (keyof RuleOptions<unknown>)[] = [
  'policy',
  'name',
  'by',
  'routes',
  'weighted',
  'shadow',
  'enforce',
];

export function compileRule<Req>(
  raw: unknown,
  field: string,
  defaults: { name?: string } = {},
): CompiledRule<Req> {
  if (typeof raw !== 'object' || raw === null) throw new ConfigError(field, 'expected a rule object');
  knownOptions(raw, RULE_FIELDS, field);
  const r = raw as RuleOptions<Req>;
  if (typeof r.policy !== 'string' || r.policy.length === 0) {
    throw new ConfigError(`${field}.policy`, 'expected the name of a limiter policy');
  }
  const name = r.name ?? defaults.name ?? r.policy;
  if (typeof name !== 'string' || !NAME.test(name)) {
    throw new ConfigError(`${field}.name`, `expected 1-128 printable ASCII characters, got ${shown(name)}`);
  }
  const by = r.by === undefined ? ['client' as const] : Array.isArray(r.by) ? r.by : [r.by as KeyPart<Req>];
  if (by.length === 0) throw new ConfigError(`${field}.by`, 'expected at least one key part');
  by.forEach((part, i) => {
    if (typeof part !== 'function' && !KEY_PARTS.includes(part)) {
      throw new ConfigError(
        `${field}.by${Array.isArray(r.by) ? `[${i}]` : ''}`,
        `expected one of ${KEY_PARTS.map((p) => `'${p}'`).join(', ')} or a function, got ${shown(part)}`,
      );
    }
  });
  let routes: RouteTable<true> | undefined;
  if (r.routes !== undefined) {
    if (!Array.isArray(r.routes) || r.routes.length === 0) {
      throw new ConfigError(`${field}.routes`, 'expected a non-empty list of route patterns');
    }
    routes = new RouteTable(
      r.routes.map((p) => [p, true] as const),
      `${field}.routes`,
    );
  }
  return {
    name,
    policy: r.policy,
    by,
    clientOnly: by.length === 1 && by[0] === 'client',
    routes,
    weighted: flag(r.weighted, true, `${field}.weighted`),
    shadow: flag(r.shadow, false, `${field}.shadow`),
    enforce: percentage(r.enforce, `${field}.enforce`),
  };
}

function flag(value: unknown, fallback: boolean, field: string): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== 'boolean')
    throw new ConfigError(field, `expected true or false, got ${JSON.stringify(value)}`);
  return value;
}

function percentage(value: unknown, field: string): number {
  if (value === undefined) return 100;
  if (typeof value !== 'number' || !(value >= 0 && value <= 100)) {
    throw new ConfigError(field, `expected a percentage from 0 to 100, got ${JSON.stringify(value)}`);
  }
  return value;
}

/** A route cost table: `{ 'GET /profile': 1, 'POST /reports': 20 }`. */
export function compileCosts(raw: unknown, field: string): RouteTable<number> {
  if (raw === undefined) return new RouteTable([], field);
  if (!isOptionsObject(raw)) {
    throw new ConfigError(
      field,
      "expected an object of route patterns to costs, e.g. { 'POST /reports': 20 }",
    );
  }
  const entries = Object.entries(raw);
  for (const [route, cost] of entries) {
    if (typeof cost !== 'number' || !Number.isFinite(cost) || cost <= 0) {
      throw new ConfigError(
        `${field}[${JSON.stringify(route)}]`,
        `expected a positive number, got ${JSON.stringify(cost)}`,
      );
    }
  }
  return new RouteTable(entries as [string, number][], field);
}

/** Allow or deny list entries: API keys / client keys, IP addresses and CIDR ranges. */
export class ClientList {
  readonly #keys = new Set<string>();
  readonly #ips = new IpRanges();
  readonly size: number;

  constructor(raw: unknown, field: string) {
    if (raw === undefined) raw = [];
    if (!Array.isArray(raw))
      throw new ConfigError(field, 'expected a list of API keys, IP addresses or CIDR ranges');
    raw.forEach((entry, i) => {
      if (typeof entry !== 'string' || entry.length === 0) {
        throw new ConfigError(`${field}[${i}]`, `expected a non-empty string, got ${JSON.stringify(entry)}`);
      }
      if (normalize(entry.split('/')[0]) !== undefined) this.#ips.add(entry, `${field}[${i}]`);
      else this.#keys.add(entry);
    });
    this.size = raw.length;
  }

  /** Whether any of the request's identities is listed. */
  has(ids: { apiKey?: string | undefined; client?: string | undefined; ip?: string | undefined }): boolean {
    if (this.size === 0) return false;
    if (ids.apiKey !== undefined && this.#keys.has(ids.apiKey)) return true;
    if (ids.client !== undefined && this.#keys.has(ids.client)) return true;
    return ids.ip !== undefined && this.#ips.has(ids.ip);
  }
}

/** Everything that decides which rules a request meets; swapped whole when a plans file reloads. */
export interface RuleSet<Req> {
  /** Rules every request meets, whatever its plan. */
  readonly rules: readonly CompiledRule<Req>[];
  /** Plan name -> its rules. Empty without a plans file. */
  readonly plans: ReadonlyMap<string, readonly CompiledRule<Req>[]>;
  /** API key -> plan. */
  readonly keys: ReadonlyMap<string, string>;
  /** Plan of requests without a listed key. */
  readonly defaultPlan: string | undefined;
  readonly costs: RouteTable<number>;
  readonly allow: ClientList;
  readonly deny: ClientList;
}
