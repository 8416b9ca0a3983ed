export type { Transition } from './algorithms/transition.js';
export type { BreakerOptions } from './breaker.js';
export type {
  Check,
  Decision,
  DecisionSource,
  PolicyDescription,
  Reservation,
  SlotHandle,
} from './decision.js';
export type { Duration } from './duration.js';
export {
  ArgumentError,
  ClosedError,
  ConfigError,
  StoreError,
  StoreOverloadError,
  StoreTimeoutError,
  StoreUnavailableError,
  TokenleaseError,
} from './errors.js';
export {
  type AcquireOptions,
  Limiter,
  type LimiterOptions,
  type ReserveOptions,
  type WaitOptions,
} from './limiter.js';
export { type DecisionLogEntry, type DecisionLogOptions, decisionLog } from './observe/decisionLog.js';
export type {
  BreakerEvent,
  BreakerState,
  DecisionCounts,
  DecisionEvent,
  DenyReason,
  LeaseEvent,
  LimiterStats,
  ObservedLimiter,
  Observer,
  Outcome,
  ReturnReason,
  Source,
  StoreCallEvent,
  TelemetryCounts,
} from './observe/events.js';
export type { HeavyHitter } from './observe/spaceSaving.js';
export type { OffendersOptions } from './observe/telemetry.js';
export { type QuotaAlertsOptions, quotaAlerts, type ThresholdEvent } from './observe/thresholds.js';
export type {
  ConcurrencyLeaseOptions,
  ConcurrencyPolicy,
  FailMode,
  FixedWindowPolicy,
  LeakyBucketPolicy,
  LeaseOptions,
  PolicyConfig,
  SlidingLogPolicy,
  SlidingWindowPolicy,
  TokenBucketPolicy,
  WindowLeaseOptions,
} from './policy.js';
export { MemoryStore, type MemoryStoreOptions } from './stores/memoryStore.js';
export type { RedisClient } from './stores/redisClient.js';
export { type BatchOptions, RedisStore, type RedisStoreOptions } from './stores/redisStore.js';
export type { Operation, RunOptions, Store } from './stores/store.js';
