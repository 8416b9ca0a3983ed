/**
 * Every failure tokenlease reports is a `TokenleaseError` with a stable `code`, so callers can
 * branch on `err.code` instead of parsing messages. Being over the limit is never an error: it is a
 * `Decision` with `allowed: false`.
 */
export class TokenleaseError extends Error {
  readonly code: string;
  /** The option or argument at fault, when there is one (e.g. `policies.per-key.rate`). */
  readonly field: string | undefined;

  constructor(code: string, message: string, options: { field?: string; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.field = options.field;
  }
}

/** Invalid limiter or policy configuration. Thrown by constructors, eagerly. */
export class ConfigError extends TokenleaseError {
  constructor(field: string, message: string) {
    super('ERR_TOKENLEASE_CONFIG', `Invalid \`${field}\`: ${message}`, { field });
  }
}

/** Invalid argument to a call such as `consume` (bad cost, unknown policy, non-string key). */
export class ArgumentError extends TokenleaseError {
  constructor(field: string, message: string) {
    super('ERR_TOKENLEASE_ARGUMENT', `Invalid \`${field}\`: ${message}`, { field });
  }
}

/** The store failed or answered something unexpected. The operation may or may not have run. */
export class StoreError extends TokenleaseError {
  constructor(message: string, cause?: unknown) {
    super('ERR_TOKENLEASE_STORE', message, { cause });
  }
}

/**
 * The store did not answer within `timeoutMs`. The script may still have run on the server, so
 * tokens it would have granted count as possibly taken (they are never re-requested blindly).
 */
export class StoreTimeoutError extends TokenleaseError {
  constructor(timeoutMs: number) {
    super(
      'ERR_TOKENLEASE_STORE_TIMEOUT',
      `Store call exceeded ${timeoutMs} ms; raise \`timeoutMs\` in the RedisStore options if Redis is remote`,
      { field: 'timeoutMs' },
    );
  }
}

/**
 * The store call was not sent (the connection is down, the circuit breaker is open) or Redis
 * refused it before it changed anything (OOM when memory is full under `noeviction`, READONLY,
 * LOADING, BUSY, ...). Unlike other store failures, the operation certainly did not run, so
 * nothing it would have taken is lost.
 */
export class StoreUnavailableError extends TokenleaseError {
  /**
   * @param reachedStore Redis answered, refusing the call (OOM, READONLY, ...): a round trip was
   *   waited for, unlike a call never sent.
   */
  constructor(
    message: string,
    cause?: unknown,
    readonly reachedStore = false,
  ) {
    super('ERR_TOKENLEASE_STORE_UNAVAILABLE', message, { cause });
  }
}

/**
 * The store was answering, but the call waited behind so many others (thousands of keys new to
 * the instance at one moment) that its `timeoutMs` ran out before it was sent. Never sent, so it
 * is a `StoreUnavailableError` (same `code`) and the fail policy decides; the circuit breaker does
 * not count it, as the store is not failing.
 */
export class StoreOverloadError extends StoreUnavailableError {}

/** The limiter (or store) was used after `close()`. */
export class ClosedError extends TokenleaseError {
  constructor(what: string) {
    super('ERR_TOKENLEASE_CLOSED', `${what} was used after close()`);
  }
}

/**
 * A value as an error message shows it: strings quoted, anything else as `String` writes it
 * (`NaN`, `10n`, `Symbol(x)`). `JSON.stringify` throws on a BigInt and writes NaN as `null`, so
 * it would turn a bad option into a TypeError or name the wrong value.
 */
export function shown(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'object' && value !== null) return Array.isArray(value) ? 'a list' : 'an object';
  if (typeof value === 'bigint') return `${value}n`;
  return String(value);
}
