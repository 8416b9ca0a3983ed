import { createHash } from 'node:crypto';

/** Keys longer than this are hashed: they stay bounded in Redis and inside one cluster slot tag. */
const MAX_LITERAL_KEY = 64;

/**
 * The one place storage keys are built (a store may prepend its own prefix). The client key goes into a Redis Cluster hash tag, so all
 * of one client's state lives in one slot. Keys that are long, contain braces (which would end the
 * tag early) or are not well-formed UTF-16 (which would collide once encoded as UTF-8) are replaced
 * by their SHA-256; the `k:` / `h:` marker keeps a literal key from colliding with a hashed one.
 */
export function storageKey(algorithm: string, policy: string, key: string): string {
  const literal =
    key.length <= MAX_LITERAL_KEY && !key.includes('{') && !key.includes('}') && key.isWellFormed();
  const tag = literal
    ? `k:${key}`
    : `h:${createHash('sha256')
        .update(key, key.isWellFormed() ? 'utf8' : 'utf16le')
        .digest('base64url')}`;
  // Policy names may contain anything but cannot be confused with the tag: it ends at the first `}`.
  return `{${tag}}:${algorithm}:${policy}`;
}
