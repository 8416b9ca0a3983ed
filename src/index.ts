export type { Transition } from './algorithms/tokenBucket.js';
export type { Check, Decision, Reservation, SlotHandle } from './decision.js';
export type { Duration } from './duration.js';
export {
  ArgumentError,
  ClosedError,
  ConfigError,
  StoreError,
  StoreTimeoutError,
  TokenleaseError,
} from './errors.js';
export {
  type AcquireOptions,
  Limiter,
  type LimiterOptions,
  type LimiterStats,
  type PolicyDescription,
  type ReserveOptions,
  type WaitOptions,
} from './limiter.js';
export type {
  ConcurrencyLeaseOptions,
  ConcurrencyPolicy,
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
export { RedisStore, type RedisStoreOptions } from './stores/redisStore.js';
export type { Operation, Store } from './stores/store.js';
