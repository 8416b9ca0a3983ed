import type { IncomingMessage, ServerResponse } from 'node:http';
import { knownOptions } from '../options.js';
import { type Outcome, RateLimitCore, type RateLimitInfo, type RateLimitOptions } from './core.js';
import { sendRateLimitHeaders } from './headers.js';
import { pathOf, type RequestView } from './request.js';

/** A refused request as handed to a custom `handler`: status, body and why. Headers are already set. */
export type Refusal = Extract<Outcome, { action: 'refuse' }>;

export interface NodeRateLimitOptions extends RateLimitOptions<IncomingMessage> {
  /**
   * Sends the refusal instead of the default JSON body (the rate-limit headers and `Retry-After`
   * are already on `res`).
   * @default writes `refusal.status`, `refusal.contentType` and `refusal.body` as JSON
   */
  handler?: (req: IncomingMessage, res: ServerResponse, refusal: Refusal) => void;
  /**
   * The decision is put on `req[requestPropertyName]`.
   * @default 'rateLimit'
   */
  requestPropertyName?: string;
}

/**
 * Every option of `rateLimit`, kept complete by the type (a key missing or extra fails to compile):
 * a misspelt option (`trustproxy`) is refused rather than leaving its default silently in force.
 */
const NODE_OPTIONS = Object.keys({
  limiter: true,
  rules: true,
  plans: true,
  costs: true,
  cost: true,
  apiKeyHeader: true,
  user: true,
  trustProxy: true,
  ipv6Subnet: true,
  keyGenerator: true,
  skip: true,
  allowList: true,
  denyList: true,
  standardHeaders: true,
  legacyHeaders: true,
  hideRemaining: true,
  statusCode: true,
  responseFormat: true,
  message: true,
  passOnStoreError: true,
  onExceeding: true,
  onExceeded: true,
  onShadowExceeded: true,
  onError: true,
  now: true,
  handler: true,
  requestPropertyName: true,
} satisfies Record<keyof NodeRateLimitOptions, true>);

/** Resolves true when the request may go on, false when a refusal was sent. */
export type NodeRateLimit = (req: IncomingMessage, res: ServerResponse) => Promise<boolean>;

/**
 * Rate limiting for any `(req, res)` server:
 *
 * ```ts
 * const limit = rateLimit({ limiter, rules: [{ policy: 'per-client' }] });
 * http.createServer(async (req, res) => {
 *   if (!(await limit(req, res))) return;
 *   res.end('hello');
 * });
 * ```
 */
export function rateLimit(options: NodeRateLimitOptions): NodeRateLimit {
  const core = new RateLimitCore(options, nodeView);
  knownOptions(options, NODE_OPTIONS);
  const property = options.requestPropertyName ?? 'rateLimit';
  const apply = (outcome: Outcome, req: IncomingMessage, res: ServerResponse): boolean => {
    (req as unknown as Record<string, RateLimitInfo | undefined>)[property] = outcome.info;
    sendRateLimitHeaders(res, outcome.headers);
    if (outcome.action === 'next') return true;
    if (options.handler) options.handler(req, res, outcome);
    else sendRefusal(res, outcome);
    return false;
  };
  return (req, res) => {
    const passed = core.checkThen(req, apply, res);
    return passed === true ? PASSED : passed === false ? STOPPED : passed;
  };
}

/** `rateLimit`'s answers when decided in the turn it was called: the same settled promises each time. */
const PASSED = Promise.resolve(true);
const STOPPED = Promise.resolve(false);

/** What the limiter reads from a plain Node request. */
export function nodeView(req: IncomingMessage): RequestView {
  return new NodeView(req);
}

/** The path is split off the URL only when asked for: only routes, costs and observers need it. */
class NodeView implements RequestView {
  readonly method: string;
  readonly headers: IncomingMessage['headers'];
  readonly remoteAddress: string | undefined;
  readonly #url: string | undefined;
  #path: string | undefined;

  constructor(req: IncomingMessage) {
    this.method = req.method ?? 'GET';
    this.headers = req.headers;
    this.remoteAddress = req.socket.remoteAddress;
    this.#url = req.url;
  }

  get path(): string {
    this.#path ??= pathOf(this.#url);
    return this.#path;
  }
}

/** Writes a refusal's status and JSON body (headers are set by the caller). */
export function sendRefusal(res: ServerResponse, refusal: Refusal): void {
  if (res.headersSent) {
    res.end();
    return;
  }
  const body = JSON.stringify(refusal.body);
  res.statusCode = refusal.status;
  res.setHeader('Content-Type', refusal.contentType);
  res.setHeader('Content-Length', Buffer.byteLength(body));
  res.end(body);
}
