import type { FastifyPluginAsync, FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify';
import { ConfigError, shown } from '../errors.js';
import type { Limiter } from '../limiter.js';
import { type Outcome, RateLimitCore, type RateLimitInfo, type RateLimitOptions } from './core.js';
import { type PeerFastifyOptions, type RateLimitResult, registerPeer } from './fastifyPeer.js';
import type { Refusal } from './node.js';
import { pathOf, type RequestView } from './request.js';

export type { RateLimitInfo } from './core.js';
export {
  normalizeIP,
  type PeerErrorContext,
  type PeerFastifyOptions,
  type RateLimitResult,
} from './fastifyPeer.js';
export type { Refusal } from './node.js';

/** The hooks the check can run in (all take `(request, reply)`). */
export type RateLimitHook = 'onRequest' | 'preValidation' | 'preHandler';

/** What `errorResponseBuilder` gets, shaped like @fastify/rate-limit's context. */
export interface ErrorResponseContext {
  statusCode: number;
  ban: false;
  /** `'3 seconds'`: when to retry, in words. */
  after: string;
  /** The limit of the rule that refused. */
  max: number;
  /** Milliseconds until the request can pass. */
  ttl: number;
  refusal: Refusal;
}

interface FastifyOptions
  extends Omit<
    RateLimitOptions<FastifyRequest>,
    'onExceeding' | 'onExceeded' | 'onShadowExceeded' | 'allowList'
  > {
  /**
   * Hook the check runs in; `onRequest` refuses before the body is read.
   * @default 'onRequest'
   */
  hook?: RateLimitHook;
  /** Clients never limited: keys/IPs/CIDRs, or a function of (request, client key). */
  allowList?: readonly string[] | ((req: FastifyRequest, key: string) => boolean | Promise<boolean>);
  /** The body of a refusal (sent with the refusal's status). @default JSON `{"error":"rate_limited",…}` */
  errorResponseBuilder?: (req: FastifyRequest, context: ErrorResponseContext) => unknown;
  /** Alias of `passOnStoreError`, as @fastify/rate-limit names it. @default false */
  skipOnError?: boolean;
  /** Called for each request within the limits. */
  onExceeding?: (req: FastifyRequest, key: string, info: RateLimitInfo) => void;
  /** Called for each refused request. */
  onExceeded?: (req: FastifyRequest, key: string, info: RateLimitInfo) => void;
  /** Called when a shadow rule would have refused. */
  onShadowExceeded?: (req: FastifyRequest, key: string, info: RateLimitInfo) => void;
}

export interface FastifyRateLimitOptions extends FastifyOptions {
  /**
   * Limit every route; with `false`, only routes with `config.rateLimit` are limited.
   * @default true
   */
  global?: boolean;
}

/** `config: { rateLimit }` of a route: overrides of the plugin options, or `false` for none. */
export type RouteRateLimit = Partial<FastifyOptions>;

declare module 'fastify' {
  interface FastifyContextConfig {
    rateLimit?: RouteRateLimit | PeerFastifyOptions | false;
  }
  interface FastifyInstance {
    /** Without a `limiter`: a hook handler limiting whatever it is added to (e.g. the not-found handler). */
    rateLimit(options?: PeerFastifyOptions): (req: FastifyRequest, reply: FastifyReply) => Promise<void>;
    /** Without a `limiter`: a function deciding a request by hand (counts it). */
    createRateLimit(options?: PeerFastifyOptions): (req: FastifyRequest) => Promise<RateLimitResult>;
  }
  interface FastifyRequest {
    /** Set by tokenlease's rate-limit plugin on limited routes. */
    rateLimit: RateLimitInfo | undefined;
  }
}

const HOOKS: readonly RateLimitHook[] = ['onRequest', 'preValidation', 'preHandler'];

/**
 * Fastify 4 or 5 plugin. Register it before the routes: it hooks each route as it is added, so routes
 * added earlier and the not-found handler are not limited. Per route, `config: { rateLimit: false }`
 * turns it off and `config: { rateLimit: { … } }` overrides options (rules, cost, hook, …).
 *
 * ```ts
 * await app.register(rateLimitPlugin, { limiter, rules: [{ policy: 'per-client' }] });
 * app.post('/reports', { config: { rateLimit: { cost: 20 } } }, handler);
 * ```
 */
const plugin: FastifyPluginAsync<FastifyRateLimitOptions | PeerFastifyOptions> = async (fastify, raw) => {
  if ((raw as { limiter?: Limiter }).limiter === undefined)
    return registerPeer(fastify, raw as PeerFastifyOptions);
  const options = raw as FastifyRateLimitOptions;
  if (!fastify.hasRequestDecorator('rateLimit')) fastify.decorateRequest('rateLimit', undefined);
  const global = options.global ?? true;
  fastify.addHook('onRoute', (route) => {
    const config = route.config?.rateLimit;
    if (config === false || (config === undefined && !global)) return;
    if (config !== undefined && (typeof config !== 'object' || config === null)) {
      throw new ConfigError(
        `config.rateLimit of ${route.method} ${route.url}`,
        'expected rate-limit options or false',
      );
    }
    const { global: _ignored, ...base } = options;
    const merged: FastifyOptions = { ...base, ...(config as RouteRateLimit | undefined) };
    const hook = merged.hook ?? 'onRequest';
    if (!HOOKS.includes(hook)) {
      throw new ConfigError(
        'hook',
        `expected one of ${HOOKS.map((h) => `'${h}'`).join(', ')}, got ${shown(hook)}`,
      );
    }
    const handler = routeHandler(merged, route.url);
    const existing = route[hook] as onRequestHookHandler | onRequestHookHandler[] | undefined;
    (route as unknown as Record<string, unknown>)[hook] = [
      ...(existing === undefined ? [] : [existing].flat()),
      handler,
    ];
  });
};

function routeHandler(o: FastifyOptions, pattern: string): onRequestHookHandler {
  const withKey = (fn: ((req: FastifyRequest, key: string, info: RateLimitInfo) => void) | undefined) =>
    fn && ((req: FastifyRequest, info: RateLimitInfo) => fn(req, info.key, info));
  const core = new RateLimitCore<FastifyRequest>(
    {
      ...o,
      passOnStoreError: o.passOnStoreError ?? o.skipOnError,
      onExceeding: withKey(o.onExceeding),
      onExceeded: withKey(o.onExceeded),
      onShadowExceeded: withKey(o.onShadowExceeded),
    },
    // The route's pattern is known here; `request.routeOptions` builds a new object per read.
    (request) => viewOf(request, pattern),
  );
  /** Applies the outcome; true when it sent a refusal (the route must not run). */
  const apply = (outcome: Outcome, request: FastifyRequest, reply: FastifyReply): boolean => {
    request.rateLimit = outcome.info;
    // Pairs read by index: destructuring them goes through the iterator protocol.
    for (const header of outcome.headers) reply.header(header[0], header[1]);
    if (outcome.action === 'next') return false;
    reply.code(outcome.status);
    if (o.errorResponseBuilder) {
      const context: ErrorResponseContext = {
        statusCode: outcome.status,
        ban: false,
        after:
          outcome.retryAfter === undefined
            ? 'never'
            : `${outcome.retryAfter} second${outcome.retryAfter === 1 ? '' : 's'}`,
        max: outcome.info?.limit ?? 0,
        ttl: outcome.info?.retryAfterMs ?? 0,
        refusal: outcome,
      };
      reply.send(o.errorResponseBuilder(request, context));
    } else {
      reply.type(outcome.contentType).send(JSON.stringify(outcome.body));
    }
    return true;
  };
  // A callback hook, not an async one: a request admitted on a lease hit goes on in this turn,
  // with no promise for Fastify to wait for. A refusal is sent, and `done` not called. A boolean,
  // not the reply: a reply is a thenable, and a promise resolved with it would wait for the
  // response to end and then resolve with nothing, as if the request had been admitted.
  return (request, reply, done) => {
    const refused = core.checkThen(request, apply, reply);
    if (refused === false) done();
    else if (refused !== true) refused.then((sent) => sent || done(), done);
  };
}

/** What the limiter reads from a Fastify request; the route pattern comes from the router. */
export function fastifyView(request: FastifyRequest): RequestView {
  return viewOf(request, request.routeOptions.url);
}

function viewOf(request: FastifyRequest, routePattern: string | undefined): RequestView {
  return new FastifyView(request, routePattern);
}

/**
 * The path and addresses are read only when asked for: the limiter needs `request.ip` (Fastify's
 * trustProxy applied) or the socket's address, not both, and the headers only for API keys and
 * forwarded addresses.
 */
class FastifyView implements RequestView {
  readonly method: string;
  readonly routePattern: string | undefined;
  readonly #request: FastifyRequest;
  #path: string | undefined;

  constructor(request: FastifyRequest, routePattern: string | undefined) {
    this.method = request.method;
    this.routePattern = routePattern;
    this.#request = request;
  }

  /** Only routes, costs and observers need the path. */
  get path(): string {
    this.#path ??= pathOf(this.#request.url);
    return this.#path;
  }

  get headers(): FastifyRequest['headers'] {
    return this.#request.headers;
  }

  get remoteAddress(): string | undefined {
    return this.#request.socket.remoteAddress;
  }

  get clientAddress(): string | undefined {
    return this.#request.ip;
  }
}

// What fastify-plugin would set, without the dependency: hooks apply outside the plugin's scope.
Object.assign(plugin, {
  [Symbol.for('skip-override')]: true,
  [Symbol.for('fastify.display-name')]: 'tokenlease-rate-limit',
});

// `fastifyRateLimit` is @fastify/rate-limit's name of its plugin export.
export { plugin as fastifyRateLimit, plugin as rateLimitPlugin };
export default plugin;
