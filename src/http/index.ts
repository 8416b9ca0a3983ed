// tokenlease/http: the framework-agnostic core and the node:http adapter. Loads no framework;
// Express and Fastify adapters live in `tokenlease/express` and `tokenlease/fastify`.
export { ClientIp, type ClientIpOptions, IpRanges, type TrustProxy } from './clientIp.js';
export {
  type Outcome,
  RateLimitCore,
  type RateLimitInfo,
  type RateLimitOptions,
  type RuleResult,
} from './core.js';
export {
  type HeaderOptions,
  type RuleState,
  rateLimitHeaders,
  retryAfterSeconds,
  type StandardHeaders,
} from './headers.js';
export {
  type NodeRateLimit,
  type NodeRateLimitOptions,
  nodeView,
  type Refusal,
  rateLimit,
  sendRefusal,
} from './node.js';
export { Plans, type PlansChange, PlansError, type WatchOptions } from './plans.js';
export { buildKey, pathOf, type RequestView, readApiKey } from './request.js';
export { QUOTA_EXCEEDED, type ResponseFormat } from './response.js';
export { rolloutPosition } from './rollout.js';
export { type RouteMatch, RouteTable } from './routes.js';
export type { KeyPart, KeyPartName, RuleOptions, RuleSet } from './rules.js';
