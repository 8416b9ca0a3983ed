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
export type { LeaseOptions, PolicyConfig, TokenBucketPolicy } from './policy.js';
export { MemoryStore, type MemoryStoreOptions } from './stores/memoryStore.js';
export { RedisStore, type RedisStoreOptions } from './stores/redisStore.js';
export type { Operation, Store } from './stores/store.js';
