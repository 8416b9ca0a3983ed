export type { Transition } from './algorithms/tokenBucket.js';
export type { Check, Decision } from './decision.js';
export type { Duration } from './duration.js';
export {
  ArgumentError,
  ClosedError,
  ConfigError,
  StoreError,
  StoreTimeoutError,
  TokenleaseError,
} from './errors.js';
export { Limiter, type LimiterOptions, type LimiterStats, type PolicyDescription } from './limiter.js';
export { type DecisionLogEntry, type DecisionLogOptions, decisionLog } from './observe/decisionLog.js';
export type {
  BreakerEvent,
  BreakerState,
  DecisionEvent,
  DenyReason,
  LeaseEvent,
  ObservedLimiter,
  Observer,
  Outcome,
  ReturnReason,
  Source,
  StoreCallEvent,
} from './observe/events.js';
export type { HeavyHitter } from './observe/spaceSaving.js';
export type { OffendersOptions, TelemetryCounts } from './observe/telemetry.js';
export { type QuotaAlertsOptions, quotaAlerts, type ThresholdEvent } from './observe/thresholds.js';
export type { LeaseOptions, PolicyConfig, TokenBucketPolicy } from './policy.js';
export { MemoryStore, type MemoryStoreOptions } from './stores/memoryStore.js';
export { RedisStore, type RedisStoreOptions } from './stores/redisStore.js';
export type { Operation, Store } from './stores/store.js';
