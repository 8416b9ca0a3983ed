/**
 * `tokenlease/fastify` without a `limiter`: @fastify/rate-limit's options, defaults, headers,
 * decorators and error path, counted by tokenlease. `max` per `timeWindow` is a fixed-window policy
 * whose windows open at a client's first request (as the plugin's stores count), exact, on `store`.
 * Each route config (and each `rateLimit(options)` / `createRateLimit(options)`) counts on its own,
 * as the plugin's child stores do; requests over the limit are not counted (see docs/migrating.md).
 */
import { format, parse } from '@lukeed/ms';
import type {
  FastifyInstance,
  FastifyReply,
  FastifyRequest,
  onRequestHookHandler,
  RouteOptions,
} from 'fastify';
import { ConfigError, shown } from '../errors.js';
import { Limiter } from '../limiter.js';
import type { PolicyConfig, WindowLeaseOptions } from '../policy.js';
import { MemoryStore } from '../stores/memoryStore.js';
import type { RedisClient } from '../stores/redisClient.js';
import { RedisStore } from '../stores/redisStore.js';
import type { Store } from '../stores/store.js';
import { ipKey, parseHop } from './clientIp.js';

type Awaitable<T> = T | Promise<T>;
type PerRequest<T> = (req: FastifyRequest, key: string) => Awaitable<T>;

/** What `errorResponseBuilder` gets. */
export interface PeerErrorContext {
  statusCode: number;
  ban: boolean;
  /** `'1 second'`, `'2 minutes'`: when to retry, in words. */
  after: string;
  max: number;
  /** Ms until the window ends. */
  ttl: number;
}

/** @fastify/rate-limit's options (a `store` is a tokenlease store). */
export interface PeerFastifyOptions {
  /** With a `limiter`, the plugin takes tokenlease's options instead (`FastifyRateLimitOptions`). */
  limiter?: undefined;
  /** Limit every route; with `false`, only routes with `config.rateLimit`. @default true */
  global?: boolean;
  /** Requests per window, or a function of the request and key. @default 1000 */
  max?: number | PerRequest<number>;
  /** Ms, an @lukeed/ms string (`'1 minute'`, `'10s'`), or a function. @default 60_000 */
  timeWindow?: number | string | PerRequest<number>;
  /** @default 'onRequest' */
  hook?: 'onRequest' | 'preParsing' | 'preValidation' | 'preHandler';
  /** Keys never limited, or a function of the request and key. */
  allowList?: readonly string[] | PerRequest<boolean>;
  /** Refusals in a window after which the client gets 403 instead of 429. @default none */
  ban?: number;
  onBanReach?: (req: FastifyRequest, key: string) => void;
  onExceeding?: (req: FastifyRequest, key: string) => void;
  onExceeded?: (req: FastifyRequest, key: string) => void;
  /** Every refused request restarts the client's window. @default false */
  continueExceeding?: boolean;
  /**
   * Every refused request restarts the client's window, and the n-th refusal in a row says to retry
   * in `timeWindow * 2^(n-1)` (as the plugin's local store: the window itself stays `timeWindow`).
   * @default false
   */
  exponentialBackoff?: boolean;
  /** @default 64 */
  ipv6Subnet?: number;
  /** The client key; a number counts as its string. @default the IP, IPv6 by its /ipv6Subnet */
  keyGenerator?: (req: FastifyRequest) => Awaitable<string | number>;
  /** What is thrown to Fastify's error handler. @default an Error with `statusCode` */
  errorResponseBuilder?: (req: FastifyRequest, context: PeerErrorContext) => unknown;
  /** Let requests through when the store fails (beyond the policy's fail mode). @default false */
  skipOnError?: boolean;
  /** Headers of refused requests, each on by default. */
  addHeaders?: Partial<Record<string, boolean>>;
  /** Headers of admitted requests, each on by default. */
  addHeadersOnExceeding?: Partial<Record<string, boolean>>;
  /** `ratelimit-*` names instead of `x-ratelimit-*`. @default false */
  enableDraftSpec?: boolean;
  /** Where the counts live (a `RedisStore` to share them). @default new MemoryStore() */
  store?: Store;
  /** As in @fastify/rate-limit: an ioredis client, counted in a `RedisStore` on it (unless `store`). */
  redis?: RedisClient;
  /** Key prefix of the `RedisStore` made for `redis`. @default 'fastify-rate-limit-' */
  nameSpace?: string;
  /** Leasing of the built policies. @default 'exact' */
  lease?: WindowLeaseOptions | 'exact';
  /** Route config only: routes with one groupId share their counts. */
  groupId?: string;
}

/** What `createRateLimit()`'s function resolves to. */
export interface RateLimitResult {
  isAllowed: boolean;
  key: string;
  max?: number;
  timeWindow?: number;
  remaining?: number;
  ttl?: number;
  ttlInSeconds?: number;
  isExceeded?: boolean;
  isBanned?: boolean;
}

const LABELS = {
  plain: { limit: 'x-ratelimit-limit', remaining: 'x-ratelimit-remaining', reset: 'x-ratelimit-reset' },
  draft: { limit: 'ratelimit-limit', remaining: 'ratelimit-remaining', reset: 'ratelimit-reset' },
};

/**
 * @fastify/rate-limit's key of an address: IPv4-mapped IPv6 as IPv4, other IPv6 as the first
 * address of its /ipv6Subnet network, canonically written; anything else lower-cased.
 */
export function normalizeIP(ip: string, ipv6Subnet = 64): string {
  const address = parseHop(ip);
  if (address === undefined) return ip.toLowerCase();
  if (!address.includes(':')) return address;
  // The network's first address, without the prefix length.
  return ipKey(address, ipv6Subnet < 128 ? ipv6Subnet : false).replace(/\/\d+$/, '');
}

/** Fields of the params whose values are fixed per registration, route or decorator call. */
interface Params extends PeerFastifyOptions {
  /** Which count this is: the plugin's, a route config's or a decorator's (the plugin's child stores). */
  scope: string;
}

const TRUNCATE = (n: unknown) =>
  typeof n === 'number' && Number.isFinite(n) && n >= 0 ? Math.trunc(n) : undefined;

/**
 * `timeWindow` as @fastify/rate-limit reads it: ms (truncated), a duration string, or a function
 * of the request; a number that is none (NaN, negative) is its default minute, as there. A window
 * of 0 ms or a string that is no duration is refused here, where the plugin would fail every request.
 */
function timeWindowOf(value: unknown): number | PerRequest<number> {
  if (typeof value === 'function') return value as PerRequest<number>;
  const ms =
    typeof value === 'string' ? parse(value) : value === undefined ? 60_000 : (TRUNCATE(value) ?? 60_000);
  if (ms === undefined || !(ms > 0)) {
    throw new ConfigError(
      'timeWindow',
      `expected a positive number of ms, a duration ('1 minute') or a function of the request, got ${shown(value)}`,
    );
  }
  return ms;
}

/** The plugin state of one registration. */
export class PeerRateLimit {
  readonly #limiter: { instance: Limiter | undefined; store: Store; policies: Record<string, PolicyConfig> };
  readonly #ran = Symbol('tokenlease.rateLimitRan');
  #scopes = 0;
  readonly global: Params;

  /** A store made here (from `redis`), closed with the plugin. */
  readonly #owned: Store | undefined;

  constructor(options: PeerFastifyOptions) {
    this.#owned =
      options.store === undefined && options.redis !== undefined
        ? new RedisStore({ client: options.redis, prefix: options.nameSpace ?? 'fastify-rate-limit-' })
        : undefined;
    this.#limiter = {
      instance: undefined,
      store: options.store ?? this.#owned ?? new MemoryStore(),
      policies: {},
    };
    this.global = this.#params(options, 'plugin');
  }

  /** Merges route or decorator options over the plugin's, with their own count. */
  child(options: PeerFastifyOptions): Params {
    if (options.groupId !== undefined && typeof options.groupId !== 'string') {
      throw new Error('groupId must be a string');
    }
    return this.#params({ ...this.global, ...options }, `child${++this.#scopes}`);
  }

  #params(o: PeerFastifyOptions, scope: string): Params {
    // A hook Fastify does not run before the handler would put the check where nothing calls it.
    if (o.hook !== undefined && !PEER_HOOKS.includes(o.hook)) {
      throw new ConfigError(
        'hook',
        `expected one of ${PEER_HOOKS.map((h) => `'${h}'`).join(', ')}, got ${shown(o.hook)}`,
      );
    }
    if (o.keyGenerator !== undefined && typeof o.keyGenerator !== 'function') {
      throw new ConfigError(
        'keyGenerator',
        `expected a function of the request, got ${shown(o.keyGenerator)}`,
      );
    }
    const timeWindow = timeWindowOf(o.timeWindow);
    const max = TRUNCATE(o.max) ?? (typeof o.max === 'function' ? o.max : 1000);
    const subnet = TRUNCATE(o.ipv6Subnet);
    return {
      ...o,
      scope,
      max,
      timeWindow,
      ban: TRUNCATE(o.ban),
      ipv6Subnet: subnet !== undefined && subnet <= 128 ? subnet : 64,
      hook: o.hook ?? 'onRequest',
    };
  }

  /** The hook handler that limits a route (or the not-found handler, via `fastify.rateLimit()`). */
  handler(p: Params): (req: FastifyRequest, reply: FastifyReply) => Promise<void> {
    return async (req, reply) => {
      const flags = req as unknown as Record<symbol, boolean>;
      // A route's HEAD twin and a decorator on a limited route run the hook twice: count once.
      if (flags[this.#ran]) return;
      flags[this.#ran] = true;
      const r = await this.apply(p, req);
      if (r.isAllowed || r.max === undefined) return;
      const labels = p.enableDraftSpec ? LABELS.draft : LABELS.plain;
      const exceeding = { ...p.addHeadersOnExceeding };
      const exceeded = { ...p.addHeaders };
      if (!r.isExceeded) {
        if (exceeding[labels.limit] !== false) reply.header(labels.limit, r.max);
        if (exceeding[labels.remaining] !== false) reply.header(labels.remaining, r.remaining);
        if (exceeding[labels.reset] !== false) reply.header(labels.reset, r.ttlInSeconds);
        p.onExceeding?.(req, r.key);
        return;
      }
      p.onExceeded?.(req, r.key);
      if (exceeded[labels.limit] !== false) reply.header(labels.limit, r.max);
      if (exceeded[labels.remaining] !== false) reply.header(labels.remaining, 0);
      if (exceeded[labels.reset] !== false) reply.header(labels.reset, r.ttlInSeconds);
      if (exceeded['retry-after'] !== false) reply.header('retry-after', r.ttlInSeconds);
      const context: PeerErrorContext = {
        statusCode: 429,
        ban: false,
        max: r.max,
        ttl: r.ttl!,
        after: format(r.ttlInSeconds! * 1000, true),
      };
      if (r.isBanned) {
        context.statusCode = 403;
        context.ban = true;
        p.onBanReach?.(req, r.key);
      }
      throw (p.errorResponseBuilder ?? defaultError)(req, context);
    };
  }

  /**
   * One decision: @fastify/rate-limit's `applyRateLimit`. With `increment: false` (a
   * `createRateLimit()` call's option) it only reads the count, as the plugin's `store.get` does.
   */
  async apply(p: Params, req: FastifyRequest, increment = true): Promise<RateLimitResult> {
    // Callbacks see the key as the generator returned it (a number stays a number); it is counted
    // as its string.
    let key: string | number = p.keyGenerator ? await p.keyGenerator(req) : normalizeIP(req.ip, p.ipv6Subnet);
    const groupId = (req.routeOptions.config as { rateLimit?: { groupId?: string } } | undefined)?.rateLimit
      ?.groupId;
    if (groupId) key = `${key}${groupId}`;
    if (p.allowList) {
      const allowed =
        typeof p.allowList === 'function'
          ? await p.allowList(req, key as string)
          : p.allowList.includes(key as string);
      if (allowed) return { isAllowed: true, key: key as string };
    }
    const max = typeof p.max === 'function' ? await p.max(req, key as string) : p.max!;
    const timeWindow =
      typeof p.timeWindow === 'function' ? await p.timeWindow(req, key as string) : (p.timeWindow as number);
    const result = { isAllowed: false, key: key as string, max, timeWindow };
    try {
      const scope = groupId ? `group:${groupId}` : p.scope;
      const k = String(key);
      const counted = increment
        ? await this.#count(p, scope, k, max, timeWindow)
        : await this.#read(p, scope, k, max, timeWindow);
      return { ...result, ...counted };
    } catch (err) {
      if (!p.skipOnError) throw err;
      return { ...result, remaining: max, ttl: 0, ttlInSeconds: 0, isExceeded: false, isBanned: false };
    }
  }

  async #count(p: Params, scope: string, key: string, max: number, timeWindow: number) {
    if (max === 0) {
      return {
        remaining: 0,
        ttl: timeWindow,
        ttlInSeconds: Math.ceil(timeWindow / 1000),
        isExceeded: true,
        isBanned: p.ban === 0,
      };
    }
    const limiter = this.#limiterWith(p, scope, max, timeWindow);
    const policy = policyName(scope, max, timeWindow);
    let d = await limiter.consume(policy, key);
    let isBanned = false;
    const countsRefusals = p.ban !== undefined || p.exponentialBackoff;
    if (!d.allowed) {
      // Refusals are not counted in the window, so a second counter holds them.
      const refusals = countsRefusals ? used(await limiter.consume(overName(scope, timeWindow), key)) : 0;
      isBanned = p.ban !== undefined && refusals > p.ban;
      if (p.continueExceeding || p.exponentialBackoff) {
        // A refusal restarts the window, full: the client waits a whole window from now.
        await limiter.reset(policy, key);
        await limiter.consume(policy, key, max);
        const backoff = p.exponentialBackoff
          ? Math.min(timeWindow * 2 ** (refusals - 1), Number.MAX_SAFE_INTEGER)
          : timeWindow;
        d = { ...d, retryAfterMs: backoff };
      }
    } else if (countsRefusals && d.remaining === max - 1) {
      // A new window: the refusals of the last one are forgotten.
      await limiter.reset(overName(scope, timeWindow), key);
    }
    const ttl = d.allowed ? d.resetMs : d.retryAfterMs;
    return {
      remaining: d.allowed ? d.remaining : 0,
      ttl,
      ttlInSeconds: Math.ceil(ttl / 1000),
      isExceeded: !d.allowed,
      isBanned,
    };
  }

  /** What `#count` would answer for the next request, counting nothing (`Limiter.peek`). */
  async #read(p: Params, scope: string, key: string, max: number, timeWindow: number) {
    if (max === 0) return this.#count(p, scope, key, max, timeWindow);
    const limiter = this.#limiterWith(p, scope, max, timeWindow);
    const d = await limiter.peek(policyName(scope, max, timeWindow), key);
    const refusals = p.ban === undefined ? 0 : used(await limiter.peek(overName(scope, timeWindow), key));
    return {
      remaining: d.remaining,
      ttl: d.resetMs,
      ttlInSeconds: Math.ceil(d.resetMs / 1000),
      // A refusal now: the window is full (under continueExceeding, refilled by the last refusal).
      isExceeded: !d.allowed,
      isBanned: p.ban !== undefined && refusals > p.ban,
    };
  }

  /** The registration's limiter, with the policies of `max` per `timeWindow` in `scope` added. */
  #limiterWith(p: Params, scope: string, max: number, timeWindow: number): Limiter {
    const l = this.#limiter;
    const name = policyName(scope, max, timeWindow);
    if (l.instance && name in l.policies) return l.instance;
    if (!(timeWindow > 0))
      throw new ConfigError('timeWindow', `expected a positive duration, got ${timeWindow}`);
    const window = {
      algorithm: 'fixed-window',
      window: timeWindow,
      anchor: 'first-hit',
      lease: p.lease ?? 'exact',
    } as const;
    l.policies[name] = { ...window, limit: max };
    l.policies[overName(scope, timeWindow)] = { ...window, limit: 1e12, lease: 'exact' };
    if (l.instance) l.instance.setPolicies(l.policies);
    else l.instance = new Limiter({ store: l.store, policies: l.policies });
    return l.instance;
  }

  /**
   * Waits (at most `waitMs`) for the connection of a store made from `redis`: calls made before it
   * is ready would be decided by the fail policy. Fastify awaits it while registering the plugin.
   */
  async ready(waitMs = 2000): Promise<void> {
    const store = this.#owned as RedisStore | undefined;
    if (!store) return;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, waitMs);
      timer.unref();
    });
    await Promise.race([store.ready().catch(() => {}), timeout]);
    clearTimeout(timer);
  }

  async close(): Promise<void> {
    await this.#limiter.instance?.close();
    await this.#owned?.close();
  }
}

const used = (d: { limit: number; remaining: number }) => d.limit - d.remaining;
const policyName = (scope: string, max: number, timeWindow: number) => `${scope}:${max}/${timeWindow}`;
const overName = (scope: string, timeWindow: number) => `${scope}:refused/${timeWindow}`;

function defaultError(_req: FastifyRequest, context: PeerErrorContext): Error {
  const err = new Error(`Rate limit exceeded, retry in ${context.after}`) as Error & { statusCode: number };
  err.statusCode = context.statusCode;
  return err;
}

/** The hooks @fastify/rate-limit runs its check in. */
const PEER_HOOKS: readonly unknown[] = ['onRequest', 'preParsing', 'preValidation', 'preHandler'];

/** Registers @fastify/rate-limit's decorators and route hooks. */
export async function registerPeer(fastify: FastifyInstance, options: PeerFastifyOptions): Promise<void> {
  const plugin = new PeerRateLimit(options);
  const global = options.global ?? true;
  const scoped = (o: PeerFastifyOptions | undefined) =>
    typeof o === 'object' ? plugin.child(o) : plugin.global;
  if (!fastify.hasDecorator('createRateLimit')) {
    fastify.decorate('createRateLimit', (o?: PeerFastifyOptions) => {
      const p = scoped(o);
      return (req: FastifyRequest, call?: { increment?: boolean }) =>
        plugin.apply(p, req, call?.increment !== false);
    });
  }
  if (!fastify.hasDecorator('rateLimit')) {
    fastify.decorate('rateLimit', (o?: PeerFastifyOptions) => plugin.handler(scoped(o)));
  }
  fastify.addHook('onRoute', (route: RouteOptions) => {
    const config = (route.config as { rateLimit?: unknown } | undefined)?.rateLimit;
    if (config === false) return;
    if (config != null && typeof config !== 'object') {
      throw new Error('Unknown value for route rate-limit configuration');
    }
    if (config == null && !global) return;
    const p = config == null ? plugin.global : plugin.child(config as PeerFastifyOptions);
    const hook = p.hook!;
    const existing = route[hook] as onRequestHookHandler | onRequestHookHandler[] | undefined;
    (route as unknown as Record<string, unknown>)[hook] = [
      ...(existing === undefined ? [] : [existing].flat()),
      plugin.handler(p),
    ];
  });
  fastify.addHook('onClose', () => plugin.close());
  await plugin.ready();
}
