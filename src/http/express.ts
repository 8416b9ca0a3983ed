import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { ConfigError, shown } from '../errors.js';
import { Limiter } from '../limiter.js';
import type { WindowLeaseOptions } from '../policy.js';
import { MemoryStore } from '../stores/memoryStore.js';
import type { Store } from '../stores/store.js';
import { ipKey, parseHop } from './clientIp.js';
import {
  type Outcome,
  RateLimitCore,
  type RateLimitInfo,
  type RateLimitOptions,
  rateLimitInfo,
} from './core.js';
import { Checks, type Logger, type ValidateOptions } from './expressChecks.js';
import {
  type RuleState,
  rateLimitHeaders,
  retryAfterSeconds,
  type StandardHeaders,
  sendRateLimitHeaders,
  standardHeadersOption,
} from './headers.js';
import type { Refusal } from './node.js';
import { buildKey, pathOf, type RequestView } from './request.js';
import { requestPropertySetter } from './requestProperty.js';

export { MemoryStore } from '../stores/memoryStore.js';
export type { RateLimitInfo } from './core.js';
export type { Logger, ValidateOptions } from './expressChecks.js';
export type { Refusal } from './node.js';

declare global {
  namespace Express {
    interface Request {
      /** Set by tokenlease's `rateLimit` (under `requestPropertyName`). */
      rateLimit?: RateLimitInfo;
    }
  }
}

type Awaitable<T> = T | Promise<T>;
/** express-rate-limit's callback shape: a value from the request and the response. */
export type ValueDeterminingMiddleware<T> = (req: Request, res: Response) => Awaitable<T>;

/** The options as resolved, with the refusal: the 4th argument of `handler`. */
export type HandlerOptions = Omit<ExpressRateLimitOptions, 'headers'> & Refusal & { statusCode: number };

export interface ExpressRateLimitOptions
  extends Omit<
    RateLimitOptions<Request>,
    'limiter' | 'keyGenerator' | 'skip' | 'message' | 'standardHeaders' | 'legacyHeaders' | 'ipv6Subnet'
  > {
  /**
   * The limiter holding the policies `rules` name. Without it the middleware takes
   * express-rate-limit's options and builds its own (see `windowMs`).
   */
  limiter?: Limiter;
  /**
   * Without `limiter`: the window of the fixed-window policy built from `windowMs` and `limit`
   * (windows open at a client's first request, as in express-rate-limit).
   * @default 60_000
   */
  windowMs?: number;
  /**
   * Without `limiter`: requests per window and client, or a function of the request (each value
   * gets its own policy). 0 refuses everything (counting each refusal, with the usual headers).
   * @default 5
   */
  limit?: number | ValueDeterminingMiddleware<number>;
  /** express-rate-limit's old name of `limit`. */
  max?: number | ValueDeterminingMiddleware<number>;
  /** Without `limiter`: where the counts live (a `RedisStore` to share them). @default new MemoryStore() */
  store?: Store;
  /**
   * Without `limiter`: leasing of the built policy. Exact by default, as express-rate-limit counts;
   * leasing saves store calls for large limits at the accuracy docs/accuracy.md describes.
   * @default 'exact'
   */
  lease?: WindowLeaseOptions | 'exact';
  /**
   * Without `limiter`: the quota name of draft-8 headers, or a function of `(req, res)` naming it
   * per request (awaited). @default e.g. `'5-in-1min'`
   */
  identifier?: string | ValueDeterminingMiddleware<string>;
  /**
   * Without `limiter`: the `Retry-After` of a refusal in seconds, or a function of `(req, res)`
   * returning it (awaited), as express-rate-limit 8's; it changes the header only, not how long a
   * client is refused. @default the seconds until the window resets
   */
  retryAfter?: number | ValueDeterminingMiddleware<number>;
  /**
   * IPv6 prefix counted as one client; without `limiter` also a function of `(req, res)` asked for
   * each IPv6 client (awaited). @default without `limiter`: 56; with one, 64
   */
  ipv6Subnet?: number | false | ValueDeterminingMiddleware<number | false>;
  /** express-rate-limit's old name of `legacyHeaders` (which wins when both are set). */
  headers?: boolean;
  /**
   * The client identity; a number counts as its string.
   * @default without `limiter`: `ipKeyGenerator(req.ip, ipv6Subnet)`; with one, the IP as `ip=…`
   */
  keyGenerator?: ValueDeterminingMiddleware<string | number | undefined>;
  /** Requests for which this returns true are not counted and get no headers. */
  skip?: ValueDeterminingMiddleware<boolean>;
  /**
   * The body of a refusal, sent with `res.send` (a string as is, an object as JSON), or a function
   * of `(req, res)` returning one (awaited).
   * @default without `limiter`: 'Too many requests, please try again later.'; with one, a JSON
   * body saying when to retry
   */
  message?: unknown;
  /**
   * Sends the refusal; the rate-limit headers and `Retry-After` are already set. The 4th argument
   * is the options (with `statusCode`) and the refusal (`status`, `reason`, `body`, `info`, …).
   * @default sends `message`
   */
  handler?: (req: Request, res: Response, next: NextFunction, options: HandlerOptions) => unknown;
  /** `true` is `'draft-6'`. @default without `limiter`: false; with one, 'draft-10' */
  standardHeaders?: StandardHeaders | boolean;
  /** `X-RateLimit-*`. @default without `limiter`: true; with one, false */
  legacyHeaders?: boolean;
  /** Gives back what a request took once its response says it succeeded. @default false */
  skipSuccessfulRequests?: boolean;
  /** Gives back what a request took once its response failed, errored or was aborted. @default false */
  skipFailedRequests?: boolean;
  /** What counts as success for the two options above. @default res.statusCode < 400 */
  requestWasSuccessful?: ValueDeterminingMiddleware<boolean>;
  /** @default 'rateLimit' */
  requestPropertyName?: string;
  /** express-rate-limit's misconfiguration warnings (see `CheckName`). @default true */
  validate?: ValidateOptions;
  /** Receives those warnings. @default process.emitWarning */
  logger?: Logger;
}

/** What `getKey` reads: express-rate-limit's `ClientRateLimitInfo`. */
export interface ClientRateLimitInfo {
  /** Requests counted in the client's current window. */
  totalHits: number;
  /** When that window ends. */
  resetTime: Date | undefined;
}

/** The middleware, with express-rate-limit's `resetKey` and `getKey`. */
export type RateLimitRequestHandler = RequestHandler & {
  /** Forgets a client key (what `keyGenerator` returns) in every rule that counts by client alone. */
  resetKey(key: string): Promise<void>;
  /**
   * Reads a client key's count without counting anything (`Limiter.peek`): of the rules that
   * count by client alone, the one with the most hits; undefined when none has counted any.
   */
  getKey(key: string): Promise<ClientRateLimitInfo | undefined>;
};

const DEFAULT_MESSAGE = 'Too many requests, please try again later.';

const PEER_OPTIONS = [
  'windowMs',
  'limit',
  'max',
  'store',
  'lease',
  'identifier',
  'retryAfter',
  'headers',
  'message',
  'statusCode',
  'legacyHeaders',
  'standardHeaders',
  'requestPropertyName',
  'skipFailedRequests',
  'skipSuccessfulRequests',
  'requestWasSuccessful',
  'keyGenerator',
  'ipv6Subnet',
  'handler',
  'skip',
  'passOnStoreError',
  'validate',
  'logger',
];
const NATIVE_OPTIONS = [
  'limiter',
  'rules',
  'plans',
  'costs',
  'cost',
  'apiKeyHeader',
  'user',
  'trustProxy',
  'allowList',
  'denyList',
  'hideRemaining',
  'responseFormat',
  'onExceeding',
  'onExceeded',
  'onShadowExceeded',
  'onError',
  'now',
];

/**
 * Express 4 or 5 middleware. Express itself is never imported: this module only shapes its types.
 *
 * With a `limiter`, it applies `rules` from it. Without one it is express-rate-limit: the same
 * options and defaults (`windowMs`, `limit`, `message`, `legacyHeaders`, …) on a fixed-window
 * policy whose windows open at a client's first request, counted in `store`.
 *
 * ```ts
 * app.use(rateLimit({ limiter, rules: [{ policy: 'per-key', by: 'apiKey' }] }));
 * app.use(rateLimit({ windowMs: 15 * 60 * 1000, limit: 100, store: new RedisStore({ client }) }));
 * ```
 */
export function rateLimit(passed: ExpressRateLimitOptions = {}): RateLimitRequestHandler {
  if (typeof passed !== 'object' || passed === null) throw new ConfigError('options', 'expected an object');
  // As express-rate-limit: an option set to undefined is an option not set.
  const o = Object.fromEntries(
    Object.entries(passed).filter(([, v]) => v !== undefined),
  ) as ExpressRateLimitOptions;
  if (
    o.logger !== undefined &&
    (typeof o.logger?.error !== 'function' || typeof o.logger.warn !== 'function')
  ) {
    throw new ConfigError('logger', 'expected an object with error() and warn() methods');
  }
  if (o.store !== undefined && typeof o.store?.run !== 'function') {
    throw new ConfigError(
      'store',
      'expected a tokenlease store (MemoryStore, RedisStore or one keeping the Store contract)',
    );
  }
  // Called per request (or per refusal): a wrong type would fail each of them, not the start-up.
  for (const name of ['keyGenerator', 'skip', 'handler', 'requestWasSuccessful'] as const) {
    if (o[name] !== undefined && typeof o[name] !== 'function') {
      throw new ConfigError(name, `expected a function of (req, res), got ${shown(o[name])}`);
    }
  }
  const checks = new Checks(o.validate, o.logger);
  checks.knownOptions(passed, [...PEER_OPTIONS, ...NATIVE_OPTIONS]);
  checks.creationStack();
  const peer = o.limiter === undefined;
  const resolved = peer ? peerOptions(o) : o;
  const cores = peer ? new PeerCores(resolved, o) : undefined;
  const native = cores ? undefined : core(resolved);
  const setInfo = requestPropertySetter(resolved.requestPropertyName ?? 'rateLimit');
  const skipOn = resolved.skipSuccessfulRequests || resolved.skipFailedRequests;

  // As express-rate-limit's, the proxy checks look at the first request only: the setup they
  // check is the app's, and reading it costs every request something.
  let proxyChecked = o.keyGenerator !== undefined || o.trustProxy !== undefined;
  const checkProxy = (req: Request) => {
    if (proxyChecked) return;
    proxyChecked = true;
    checkProxySetting(checks, req);
  };
  // What is done with an outcome. An admitted request goes on in the callback that received the
  // limiter's answer: no async function and await around it, each a promise and a turn of the
  // microtask queue on every request.
  const apply = (
    c: BoundCore,
    limit: number | undefined,
    settled: Settled | undefined,
    req: Request,
    res: Response,
    next: NextFunction,
    outcome: Outcome,
    /** The headers as `personalise` rewrote them; undefined on the first pass. */
    personalised?: Outcome['headers'],
  ): Promise<void> | undefined => {
    if (personalised === undefined) {
      setInfo(req, res, cores && outcome.info ? peerInfo(outcome.info) : outcome.info);
      const personalise = cores?.personalise;
      if (personalise !== undefined && limit !== undefined && outcome.headers.length > 0) {
        return personalise(req, res, limit, outcome).then((headers) =>
          apply(c, limit, settled, req, res, next, outcome, headers),
        );
      }
    }
    const info = outcome.info;
    sendRateLimitHeaders(res, personalised ?? outcome.headers);
    if (outcome.action === 'next') {
      if (settled && info) giveBackWhen(settled, req, res, resolved, c.limiter, taken(info));
      next();
      return undefined;
    }
    return (async () => {
      // Counting a refusal is bookkeeping for `used`: a store failure there leaves it at limit + 1.
      const refusal =
        cores && info ? await cores.countRefusal(limit!, info).catch(() => undefined) : undefined;
      if (settled && refusal) giveBackWhen(settled, req, res, resolved, c.limiter, [refusal]);
      // `used` now counts the refusal: express-rate-limit's object says so before the handler runs.
      if (refusal) setInfo(req, res, peerInfo(info!));
      const handler = resolved.handler ?? sendRefusal;
      await handler(req, res, next, { ...resolved, ...outcome, statusCode: outcome.status });
    })();
  };
  const middleware = async (req: Request, res: Response, next: NextFunction) => {
    try {
      // Listen before anything awaits, so an early close or error is not missed.
      const settled = skipOn ? responseSettled(res) : undefined;
      if (resolved.skip && (await resolved.skip(req, res))) return next();
      checkProxy(req);
      // A fixed limit is not awaited: an await of a number is a turn of the microtask queue.
      const limit = cores === undefined ? undefined : (cores.fixed ?? (await cores.limit(req, res)));
      if (limit === 0) {
        const { refusal, took } = await cores!.refuseAll(req, res);
        setInfo(req, res, peerInfo(refusal.info!));
        const personalise = cores!.personalise;
        sendRateLimitHeaders(res, personalise ? await personalise(req, res, 0, refusal) : refusal.headers);
        if (settled) giveBackWhen(settled, req, res, resolved, cores!.limiter, [took]);
        const handler = resolved.handler ?? sendRefusal;
        return await handler(req, res, next, { ...resolved, ...refusal, statusCode: refusal.status });
      }
      const c = cores ? cores.for(limit!)! : native!;
      return await c.core.checkThen(
        req,
        (outcome) => apply(c, limit, settled, req, res, next, outcome),
        undefined,
      );
    } catch (err) {
      next(err);
    }
  };
  // Nothing to wait for before the core (no `skip`, no skip options, a fixed limit above 0): the
  // core's promise alone, its failures passed to `next` as the async middleware's are.
  const fixed = cores?.fixed;
  const waits = resolved.skip !== undefined || skipOn || (cores !== undefined && !fixed);
  const direct = waits ? undefined : cores ? cores.for(fixed!) : native;
  const handler: RequestHandler = direct
    ? (req, res, next) => {
        checkProxy(req);
        // Admitted in this turn on a lease hit (`next` called, nothing returned); else a promise
        // (of the limiter, or of a refusal's handler) whose failure goes to `next`.
        const applied = direct.core.checkThen(
          req,
          (outcome) => apply(direct, fixed, undefined, req, res, next, outcome),
          undefined,
        );
        applied?.then(undefined, next);
      }
    : middleware;
  const resetKey = (key: string) => (cores ? cores.resetKey(key) : native!.resetKey(key));
  const getKey = (key: string) => (cores ? cores.getKey(key) : native!.getKey(key));
  return Object.assign(handler, { resetKey, getKey });
}

export default rateLimit;

/** express-rate-limit's name of the options type (it takes a `Partial<Options>`). */
export type Options = ExpressRateLimitOptions;

// express-rate-limit 8's constants for readable `windowMs` values (deprecated there, still exported).
export const SECOND = 1000;
export const MINUTE = 60 * SECOND;
export const HOUR = 60 * MINUTE;
export const DAY = 24 * HOUR;

/**
 * What `require('tokenlease/express')` returns (Node loads ES modules through `require` and returns
 * this export when there is one): `rateLimit` carrying the named exports, as express-rate-limit's
 * CommonJS build exports it, so `const rateLimit = require(…)` works beside `const { rateLimit } = require(…)`.
 */
const commonJs = Object.assign((options?: ExpressRateLimitOptions) => rateLimit(options), {
  default: rateLimit,
  rateLimit,
  MemoryStore,
  ipKeyGenerator,
  expressView,
  SECOND,
  MINUTE,
  HOUR,
  DAY,
});

export { commonJs as 'module.exports' };

/**
 * `req.rateLimit` without a limiter, as express-rate-limit sets it: a plain object of its five
 * fields in its order, with `current` hidden. tokenlease's own fields are there too, hidden the
 * same way, so that JSON of it, its keys and a deep comparison see express-rate-limit's object.
 */
function peerInfo(info: RateLimitInfo): RateLimitInfo {
  const shown = {
    limit: info.limit,
    used: info.used,
    remaining: info.remaining,
    resetTime: info.resetTime,
    key: info.key,
  };
  const hidden = (value: unknown) => ({ value, writable: true, configurable: true });
  return Object.defineProperties(shown, {
    current: { value: info.used },
    allowed: hidden(info.allowed),
    plan: hidden(info.plan),
    policy: hidden(info.policy),
    retryAfterMs: hidden(info.retryAfterMs),
    rules: hidden(info.rules),
    shadowExceeded: hidden(info.shadowExceeded),
  }) as RateLimitInfo;
}

/** What the limiter reads from an Express request; the route pattern once a route matched. */
export function expressView(req: Request): RequestView {
  return new ExpressView(req);
}

/**
 * The method, route, path, addresses and headers are read only when asked for: `req.ip` runs Express's trust-proxy
 * walk over `X-Forwarded-For`, and the limiter needs either it or the socket's address, not both;
 * each property of an Express request is a lookup of its own (every request has a hidden class of
 * its own), and the headers are needed only for API keys and forwarded addresses.
 */
class ExpressView implements RequestView {
  readonly #req: Request;
  #path: string | undefined;
  /** Null until read. */
  #routePattern: string | undefined | null = null;

  constructor(req: Request) {
    this.#req = req;
  }

  /** Only routes, costs and observers need the method. */
  get method(): string {
    return this.#req.method;
  }

  /** The matched route's pattern; only routes, costs and observers need it. */
  get routePattern(): string | undefined {
    if (this.#routePattern === null) {
      const req = this.#req;
      // Express sets `route` on the request once a route matched; before that, looking it up would
      // walk the whole prototype chain (each request has a hidden class of its own).
      const routePath: unknown = Object.hasOwn(req, 'route') ? req.route?.path : undefined;
      this.#routePattern = typeof routePath === 'string' ? `${req.baseUrl}${routePath}` : undefined;
    }
    return this.#routePattern;
  }

  /** Only routes, costs and observers need the path. */
  get path(): string {
    this.#path ??= pathOf(this.#req.originalUrl ?? this.#req.url);
    return this.#path;
  }

  get headers(): Request['headers'] {
    return this.#req.headers;
  }

  get remoteAddress(): string | undefined {
    return this.#req.socket?.remoteAddress;
  }

  get clientAddress(): string | undefined {
    return this.#req.ip;
  }
}

/**
 * express-rate-limit's key of an address: IPv4 as is, IPv4-mapped IPv6 as IPv4, other IPv6 as its
 * `/ipv6Subnet` network (`2001:db8:1234:5600::/56`), or canonically written with `false`.
 */
export function ipKeyGenerator(ip: string, ipv6Subnet: number | false = 56): string {
  const address = parseHop(ip);
  return address === undefined ? ip : ipKey(address, ipv6Subnet);
}

interface BoundCore {
  core: RateLimitCore<Request>;
  limiter: Limiter;
  resetKey(key: string): Promise<void>;
  getKey(key: string): Promise<ClientRateLimitInfo | undefined>;
}

function core(o: ExpressRateLimitOptions): BoundCore {
  const limiter = o.limiter!;
  const { keyGenerator, skip: _skip, message: _message, ipv6Subnet, ...rest } = o;
  if (typeof ipv6Subnet === 'function') {
    throw new ConfigError(
      'ipv6Subnet',
      'expected an integer from 1 to 128 or false (a function of the request is taken without `limiter` only)',
    );
  }
  const c = new RateLimitCore<Request>(
    {
      ...rest,
      ipv6Subnet,
      limiter,
      // Express requests carry their response: the callbacks get express-rate-limit's (req, res).
      keyGenerator: keyGenerator && ((req) => keyGenerator(req, req.res!)),
    },
    expressView,
  );
  // Rules by client alone are the ones a client key names.
  const resettable = (o.rules ?? []).filter(
    (r) =>
      r.by === undefined ||
      r.by === 'client' ||
      (Array.isArray(r.by) && r.by.length === 1 && r.by[0] === 'client'),
  );
  return {
    core: c,
    limiter,
    resetKey: async (key) => {
      await Promise.all(resettable.map((r) => limiter.reset(r.policy, buildKey([['client', key]]))));
    },
    getKey: async (key) => {
      const now = (o.now ?? Date.now)();
      const reads = await Promise.all(
        resettable.map((r) => limiter.peek(r.policy, buildKey([['client', key]]))),
      );
      return mostHits(
        reads.map((d) => ({ totalHits: d.limit - d.remaining, resetTime: new Date(now + d.resetMs) })),
      );
    },
  };
}

/** Of a client's counts, the one with the most hits; undefined when none counted any. */
function mostHits(infos: readonly (ClientRateLimitInfo | undefined)[]): ClientRateLimitInfo | undefined {
  let most: ClientRateLimitInfo | undefined;
  for (const info of infos) if (info && info.totalHits > (most?.totalHits ?? 0)) most = info;
  return most;
}

/** express-rate-limit's defaults, and its `windowMs`/`limit` as a policy of a limiter of our own. */
function peerOptions(o: ExpressRateLimitOptions): ExpressRateLimitOptions {
  const windowMs = o.windowMs ?? 60_000;
  if (!(typeof windowMs === 'number' && Number.isFinite(windowMs) && windowMs > 0)) {
    throw new ConfigError('windowMs', `expected a positive number of milliseconds, got ${String(windowMs)}`);
  }
  const { identifier, retryAfter } = o;
  if (identifier !== undefined && typeof identifier !== 'string' && typeof identifier !== 'function') {
    throw new ConfigError(
      'identifier',
      `expected a string or a function of the request, got ${shown(identifier)}`,
    );
  }
  if (
    retryAfter !== undefined &&
    typeof retryAfter !== 'function' &&
    !(typeof retryAfter === 'number' && Number.isFinite(retryAfter) && retryAfter >= 0)
  ) {
    throw new ConfigError(
      'retryAfter',
      `expected seconds (0 or more) or a function of the request returning them, got ${shown(retryAfter)}`,
    );
  }
  return {
    message: DEFAULT_MESSAGE,
    legacyHeaders: o.headers ?? true,
    standardHeaders: false,
    keyGenerator: defaultKey(o.ipv6Subnet ?? 56),
    ...o,
    windowMs,
  };
}

/** express-rate-limit's default key generator; a subnet function is asked for IPv6 clients only. */
function defaultKey(
  ipv6Subnet: NonNullable<ExpressRateLimitOptions['ipv6Subnet']>,
): ValueDeterminingMiddleware<string> {
  const ipOf = (req: Request) => req.ip ?? req.socket?.remoteAddress ?? 'unknown';
  if (typeof ipv6Subnet !== 'function') return (req) => ipKeyGenerator(ipOf(req), ipv6Subnet);
  return async (req, res) => {
    const ip = ipOf(req);
    if (!ip.includes(':') || ip.startsWith('::ffff:')) return ipKeyGenerator(ip);
    const subnet = await ipv6Subnet(req, res);
    if (subnet !== false && !(Number.isInteger(subnet) && subnet >= 1 && subnet <= 128)) {
      throw new ConfigError(
        'ipv6Subnet',
        `expected the function to return an integer from 1 to 128 or false, got ${shown(subnet)}`,
      );
    }
    return ipKeyGenerator(ip, subnet);
  };
}

/** One core per limit value (`limit` may be a function of the request), on one limiter. */
class PeerCores {
  readonly #o: ExpressRateLimitOptions;
  #limiter: Limiter | undefined;
  readonly #cores = new Map<number, BoundCore>();
  /** Every limit seen, 0 included. */
  readonly #limits = new Set<number>();
  readonly #limit: number | ValueDeterminingMiddleware<number>;
  /** The option `#limit` came from: errors name the one the user wrote. */
  readonly #limitField: 'limit' | 'max';
  readonly #standard: StandardHeaders | false;
  /** The client key of `limit: 0`'s refusals (no core decides them). */
  readonly #keyOf: (req: Request, res: Response) => Promise<string>;

  constructor(o: ExpressRateLimitOptions, raw: ExpressRateLimitOptions) {
    this.#o = o;
    this.#limitField = raw.limit === undefined && raw.max !== undefined ? 'max' : 'limit';
    this.#limit = raw.limit !== undefined ? raw.limit : raw.max !== undefined ? raw.max : 5;
    this.#standard = standardHeadersOption(o.standardHeaders, false);
    this.personalise = this.#personaliser();
    const keyGenerator = o.keyGenerator!;
    const fallback = defaultKey(o.ipv6Subnet ?? 56);
    // As the cores read it (`identify`): a number as its string, nothing as the default key.
    this.#keyOf = async (req, res) => {
      const key = await keyGenerator(req, res);
      if (typeof key === 'string') return key;
      return typeof key === 'number' && Number.isFinite(key) ? String(key) : fallback(req, res);
    };
    // A fixed limit is checked, and its policy built, before the first request: express-rate-limit
    // takes `limit: 'zz'` and never limits, which nobody means.
    if (typeof this.#limit !== 'function') this.for(checkLimit(this.#limit, this.#limitField));
  }

  /** The limiter the policies live on (built with the first limit seen). */
  get limiter(): Limiter {
    return this.#limiter!;
  }

  /** The limit when it is a number (checked at construction), not a function of the request. */
  get fixed(): number | undefined {
    return typeof this.#limit === 'function' ? undefined : this.#limit;
  }

  async limit(req: Request, res: Response): Promise<number> {
    if (typeof this.#limit !== 'function') return this.#limit;
    return checkLimit(await this.#limit(req, res), this.#limitField);
  }

  /** The core of a limit above 0; undefined for 0 (`refuseAll`), whose policy is the refusal counter alone. */
  for(limit: number): BoundCore | undefined {
    if (this.#limits.has(limit)) return this.#cores.get(limit);
    this.#limits.add(limit);
    const policy = this.#admitting(limit);
    // No policy can admit nothing: limit 0 counts its refusals only.
    const policies = Object.fromEntries(
      [...this.#limits].flatMap((n) => [
        ...(n > 0 ? [[this.#admitting(n), this.#policy(n)]] : []),
        [this.#refusals(n), { ...this.#policy(REFUSALS), lease: 'exact' as const }],
      ]),
    );
    // A limiter needs a policy, and a limit function names its values only as requests come.
    if (this.#limiter) this.#limiter.setPolicies(policies);
    else this.#limiter = new Limiter({ store: this.#o.store ?? new MemoryStore(), policies });
    if (limit === 0) return undefined;
    const {
      windowMs: _w,
      limit: _l,
      max: _m,
      store: _s,
      lease: _le,
      identifier: _i,
      ipv6Subnet,
      ...rest
    } = this.#o;
    let c = core({
      ...rest,
      ipv6Subnet: typeof ipv6Subnet === 'function' ? undefined : ipv6Subnet,
      limiter: this.#limiter,
      rules: [{ policy, by: 'client', name: this.#name(limit) }],
    });
    const limiter = this.#limiter!;
    const counted = c;
    c = {
      ...counted,
      // express-rate-limit's totalHits counts refused hits too.
      getKey: async (key) => {
        const info = await counted.getKey(key);
        if (!info) return info;
        const k = buildKey([['client', key]]);
        const [window, r] = await Promise.all([
          limiter.peek(policy, k),
          limiter.peek(this.#refusals(limit), k),
        ]);
        const refusals = stale(r, window.resetMs) ? 0 : r.limit - r.remaining;
        return { ...info, totalHits: info.totalHits + refusals };
      },
    };
    this.#cores.set(limit, c);
    return c;
  }

  /**
   * Counts a refused request, as express-rate-limit counts every hit: `used` (and `current`) keep
   * rising while a client is refused. The refusals go to a counter of their own, so the window's
   * count (what admits) stays what tokenlease admitted. Returns what it took (for the skip options).
   */
  async countRefusal(limit: number, info: RateLimitInfo): Promise<Took | undefined> {
    const refused = info.rules.find((r) => r.enforced && r.decision && !r.decision.allowed);
    if (!refused || !this.#limiter) return undefined;
    const policy = this.#refusals(limit);
    const d = refused.decision!;
    let count = await this.#limiter.consume(policy, refused.key, refused.cost);
    if (stale(count, d.resetMs)) {
      // The counter opened in an earlier window of the client's: its refusals are not this one's.
      await this.#limiter.reset(policy, refused.key);
      count = await this.#limiter.consume(policy, refused.key, refused.cost);
    }
    info.used = Math.max(0, d.limit - d.remaining) + (count.limit - count.remaining);
    return { policy, key: refused.key, cost: refused.cost };
  }

  /**
   * `limit: 0`: refuses the request, counting it as express-rate-limit counts every hit, in a
   * window opened at the client's first one, and says so in the same headers as any refusal
   * (limit 0, remaining 0, the window's reset, `Retry-After`). Returns what it took.
   */
  async refuseAll(req: Request, res: Response): Promise<{ refusal: Refusal; took: Took }> {
    this.for(0);
    const limiter = this.#limiter!;
    const o = this.#o;
    const client = await this.#keyOf(req, res);
    const took: Took = { policy: this.#refusals(0), key: buildKey([['client', client]]), cost: 1 };
    const count = await limiter.consume(took.policy, took.key, took.cost);
    const now = (o.now ?? Date.now)();
    const name = this.#name(0);
    const state: RuleState = {
      name,
      key: client,
      limit: 0,
      windowSeconds: limiter.describe(took.policy).windowSeconds,
      remaining: 0,
      resetSeconds: Math.ceil(count.resetMs / 1000),
      violated: true,
    };
    const legacy = o.legacyHeaders ?? false;
    const headers = rateLimitHeaders([state], state, {
      standard: this.#standard,
      legacy,
      hideRemaining: false,
      now,
    });
    const retryAfter = retryAfterSeconds([state]);
    if (retryAfter !== undefined && (this.#standard !== false || legacy)) {
      headers.push(['Retry-After', String(retryAfter)]);
    }
    const info = rateLimitInfo({
      allowed: false,
      key: client,
      plan: undefined,
      policy: name,
      limit: 0,
      used: count.limit - count.remaining,
      remaining: 0,
      resetTime: new Date(now + count.resetMs),
      retryAfterMs: count.resetMs,
      rules: [],
      shadowExceeded: [],
    });
    const refusal: Refusal = {
      action: 'refuse',
      reason: 'limited',
      status: o.statusCode ?? 429,
      headers,
      info,
      retryAfter,
      contentType: 'application/json; charset=utf-8',
      body: { error: 'rate_limited', message: DEFAULT_MESSAGE, policies: [name] },
    };
    return { refusal, took };
  }

  async resetKey(key: string): Promise<void> {
    const k = buildKey([['client', key]]);
    await Promise.all([
      ...[...this.#cores.values()].map((c) => c.resetKey(key)),
      ...(this.#limits.has(0) ? [this.#limiter!.reset(this.#refusals(0), k)] : []),
    ]);
  }

  async getKey(key: string): Promise<ClientRateLimitInfo | undefined> {
    const now = (this.#o.now ?? Date.now)();
    const refusedAll = async (): Promise<ClientRateLimitInfo> => {
      const d = await this.#limiter!.peek(this.#refusals(0), buildKey([['client', key]]));
      return { totalHits: d.limit - d.remaining, resetTime: new Date(now + d.resetMs) };
    };
    return mostHits(
      await Promise.all([
        ...[...this.#cores.values()].map((c) => c.getKey(key)),
        ...(this.#limits.has(0) ? [refusedAll()] : []),
      ]),
    );
  }

  /** express-rate-limit's quota name (draft-8): `identifier`, else e.g. `5-in-1min`. */
  #name(limit: number): string {
    const { identifier } = this.#o;
    return typeof identifier === 'string' ? identifier : `${limit}-in-${duration(this.#o.windowMs!)}`;
  }

  /**
   * The headers of a response as express-rate-limit 8 sends them: draft-8's quota named by an
   * `identifier` function (asked once `req.rateLimit` is set, as its default reads it), and the
   * `Retry-After` of a refusal over the limit given by `retryAfter`. Undefined when neither option
   * asks for it.
   */
  readonly personalise:
    | ((req: Request, res: Response, limit: number, outcome: Outcome) => Promise<Outcome['headers']>)
    | undefined;

  #personaliser(): PeerCores['personalise'] {
    const { identifier, retryAfter } = this.#o;
    const named = typeof identifier === 'function' && this.#standard === 'draft-8';
    if (!named && retryAfter === undefined) return undefined;
    return async (req, res, limit, outcome) => {
      const quoted = `"${this.#name(limit)}"`;
      const name = named ? `"${await identifier(req, res)}"` : quoted;
      const limited = outcome.action === 'refuse' && outcome.reason === 'limited';
      const seconds =
        limited && retryAfter !== undefined
          ? await (typeof retryAfter === 'function' ? retryAfter(req, res) : retryAfter)
          : undefined;
      return outcome.headers.map(([n, v]): [string, string] => {
        if (seconds !== undefined && n === 'Retry-After') return [n, String(seconds)];
        if ((n === 'RateLimit' || n === 'RateLimit-Policy') && v.startsWith(quoted)) {
          return [n, name + v.slice(quoted.length)];
        }
        return [n, v];
      });
    };
  }

  /**
   * The policies of a limit, named after it and the window: middlewares sharing a store (a
   * per-minute and a per-hour limit of the same size) each count in their own keys, and every
   * instance of one middleware in the same ones.
   */
  #admitting(limit: number): string {
    return `limit-${limit}-per-${this.#o.windowMs}ms`;
  }

  #refusals(limit: number): string {
    return `refused-${limit}-per-${this.#o.windowMs}ms`;
  }

  #policy(limit: number) {
    return {
      algorithm: 'fixed-window' as const,
      limit,
      window: this.#o.windowMs!,
      anchor: 'first-hit' as const,
      lease: this.#o.lease ?? 'exact',
    };
  }
}

/** The most refusals a client's window counts (far beyond any request rate). */
const REFUSALS = 1e12;

/**
 * Whether a refusal counter belongs to an earlier window than the client's current one: it opened
 * at the window's first refusal, so within one window it never ends before the window does.
 */
function stale(counter: { resetMs: number }, windowResetMs: number): boolean {
  return counter.resetMs < windowResetMs;
}

function checkLimit(limit: unknown, field: 'limit' | 'max'): number {
  if (typeof limit !== 'number' || !Number.isFinite(limit) || limit < 0) {
    throw new ConfigError(
      field,
      `expected a number of requests (0 or more) or a function of the request returning one, got ${shown(limit)}`,
    );
  }
  return limit;
}

/** express-rate-limit's quota name: `5-in-1min`, `6-in-1hr`, `8-in-2days`. */
function duration(windowMs: number): string {
  const seconds = windowMs / 1000;
  const minutes = seconds / 60;
  const hours = minutes / 60;
  const days = hours / 24;
  if (seconds < 60) return `${seconds}sec`;
  if (minutes < 60) return `${minutes}min`;
  if (hours < 24) return `${hours}hr${hours > 1 ? 's' : ''}`;
  return `${days}day${days > 1 ? 's' : ''}`;
}

/** express-rate-limit's default handler: `message` (awaited when a function) with the status. */
async function sendRefusal(
  req: Request,
  res: Response,
  _next: NextFunction,
  o: HandlerOptions,
): Promise<void> {
  res.status(o.statusCode);
  if (o.message === undefined || o.reason !== 'limited') {
    res.type(o.contentType).send(JSON.stringify(o.body));
    return;
  }
  const message: unknown =
    typeof o.message === 'function'
      ? await (o.message as ValueDeterminingMiddleware<unknown>)(req, res)
      : o.message;
  if (!res.writableEnded) res.send(message);
}

type Settled = Promise<'finish' | 'close' | 'error'>;

/** How the response ended: finished, closed before finishing (aborted), or errored. */
function responseSettled(res: Response): Settled {
  return new Promise((resolve) => {
    res.once('finish', () => resolve('finish'));
    res.once('close', () => resolve(res.writableEnded ? 'finish' : 'close'));
    res.once('error', () => resolve('error'));
  });
}

/** Tokens a request took under one policy: what skipSuccessfulRequests / skipFailedRequests give back. */
interface Took {
  policy: string;
  key: string;
  cost: number;
}

/** What an admitted request took: its enforced, allowed rules. */
function taken(info: RateLimitInfo): Took[] {
  return info.rules.filter((r) => r.enforced && r.decision?.allowed);
}

/** skipSuccessfulRequests / skipFailedRequests: gives back what the request took once the outcome is known. */
function giveBackWhen(
  settled: Settled,
  req: Request,
  res: Response,
  o: ExpressRateLimitOptions,
  limiter: Limiter,
  took: readonly Took[],
): void {
  const succeeded = o.requestWasSuccessful ?? ((_req: Request, r: Response) => r.statusCode < 400);
  void settled
    .then(async (how) => {
      const success = how === 'finish' && (await succeeded(req, res));
      if (success ? !o.skipSuccessfulRequests : !o.skipFailedRequests) return;
      await Promise.all(took.map((t) => limiter.refund(t.policy, t.key, t.cost)));
    })
    .catch((err: unknown) => {
      if (o.onError) o.onError(err, req);
      else
        process.emitWarning(err instanceof Error ? err : new Error(String(err)), { code: 'TOKENLEASE_HTTP' });
    });
}

/** The proxy checks of express-rate-limit's default key generator: they matter when the IP is the key. */
function checkProxySetting(checks: Checks, req: Request): void {
  // Conditions tested here, messages in module functions: nothing is allocated per request.
  const trust: unknown = req.app?.get?.('trust proxy');
  if (trust === true) checks.check('trustProxy', failed, trustProxyMessage);
  if (trust === false && req.headers['x-forwarded-for'] !== undefined) {
    checks.check('xForwardedForHeader', failed, forwardedForMessage);
  }
}

const failed = () => true;
const trustProxyMessage = () =>
  "the Express 'trust proxy' setting is true, which allows anyone to trivially bypass IP-based rate limiting.";
const forwardedForMessage = () =>
  "the 'X-Forwarded-For' header is set but the Express 'trust proxy' setting is false (default): every client behind that proxy shares one limit. Set 'trust proxy' to your proxies.";
