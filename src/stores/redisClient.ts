/**
 * What `RedisStore` accepts as a client: an ioredis `Redis` or `Cluster` of major 5 or 6, in any
 * reply mode (RESP2, RESP3, ioredis 6's `replyMapping`).
 *
 * Spelled out as a shape rather than imported from ioredis, because ioredis is the user's peer
 * dependency: the user's major decides the classes, and a type naming one major's classes (or one
 * `Redis<ReplyMapping>` instantiation) rejects the other's. The store itself only calls what every
 * one of them has, and checks at run time that these members exist.
 */
export interface RedisClient {
  /** ioredis's connection status, e.g. `'ready'`. */
  readonly status: string;
  readonly options: object;
  duplicate(...args: never[]): unknown;
  evalsha(...args: never[]): unknown;
  disconnect(...args: never[]): unknown;
}

/** The members `RedisClient` promises, checked on the value passed in (JavaScript callers too). */
export function isRedisClient(value: unknown): value is RedisClient {
  if (typeof value !== 'object' || value === null) return false;
  const c = value as Record<string, unknown>;
  return (
    typeof c.status === 'string' &&
    typeof c.options === 'object' &&
    typeof c.duplicate === 'function' &&
    typeof c.evalsha === 'function' &&
    typeof c.disconnect === 'function'
  );
}
