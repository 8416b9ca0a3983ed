import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { RateLimitCore, type RateLimitInfo, type RateLimitOptions } from './core.js';
import type { Refusal } from './node.js';
import { pathOf, type RequestView } from './request.js';

export type { RateLimitInfo } from './core.js';
export type { Refusal } from './node.js';

declare global {
  namespace Express {
    interface Request {
      /** Set by tokenlease's `rateLimit` (under `requestPropertyName`). */
      rateLimit?: RateLimitInfo;
    }
  }
}

export interface ExpressRateLimitOptions extends RateLimitOptions<Request> {
  /**
   * Sends the refusal (as in express-rate-limit; the rate-limit headers and `Retry-After` are
   * already set).
   * @default res.status(refusal.status).type(refusal.contentType).json(refusal.body)
   */
  handler?: (req: Request, res: Response, next: NextFunction, refusal: Refusal) => void;
  /** @default 'rateLimit' */
  requestPropertyName?: string;
}

/**
 * Express 5 middleware. Express itself is never imported: this module only shapes its types.
 *
 * ```ts
 * app.use(rateLimit({ limiter, rules: [{ policy: 'per-key', by: 'apiKey' }] }));
 * ```
 */
export function rateLimit(options: ExpressRateLimitOptions): RequestHandler {
  const core = new RateLimitCore(options, expressView);
  const property = options.requestPropertyName ?? 'rateLimit';
  return async (req, res, next) => {
    const outcome = await core.check(req);
    (req as unknown as Record<string, RateLimitInfo | undefined>)[property] = outcome.info;
    if (!res.headersSent) for (const [name, value] of outcome.headers) res.setHeader(name, value);
    if (outcome.action === 'next') return next();
    if (options.handler) return options.handler(req, res, next, outcome);
    res.status(outcome.status).type(outcome.contentType).send(JSON.stringify(outcome.body));
  };
}

/** What the limiter reads from an Express request; the route pattern once a route matched. */
export function expressView(req: Request): RequestView {
  const routePath: unknown = req.route?.path;
  return {
    method: req.method,
    path: pathOf(req.originalUrl),
    routePattern: typeof routePath === 'string' ? `${req.baseUrl}${routePath}` : undefined,
    headers: req.headers,
    remoteAddress: req.socket.remoteAddress,
  };
}
