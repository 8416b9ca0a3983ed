/** The part of an ioredis client (single node or a cluster node) this reads with. */
interface Reader {
  get(key: string): Promise<string | null>;
}

/**
 * The level a token bucket key holds (`lua/prelude.lua` stores it as the string "level time"), or
 * `full` when the key is absent: an expired bucket is a full one.
 */
export async function storedLevel(redis: Reader, key: string, full: number): Promise<number> {
  const stored = await redis.get(key);
  return stored === null ? full : Number(stored.slice(0, stored.indexOf(' ')));
}
