import { TokenleaseError } from '../errors.js';

/**
 * The misconfiguration warnings express-rate-limit users rely on, under its codes and `validate`
 * names, so `validate: { xForwardedForHeader: false }` carries over. Each fires once per middleware.
 */
export type CheckName = 'knownOptions' | 'trustProxy' | 'xForwardedForHeader' | 'creationStack';

/**
 * `false` turns every check off; an object turns single checks (or `default`: the rest) on or off.
 * express-rate-limit's other check names are accepted and ignored (tokenlease throws on those
 * misconfigurations instead).
 */
export type ValidateOptions =
  | boolean
  | (Partial<Record<CheckName | 'default', boolean>> & { [other: string]: boolean | undefined });

/** Where warnings go; express-rate-limit's `logger` shape. */
export interface Logger {
  warn(...args: unknown[]): void;
  error(...args: unknown[]): void;
}

/** A misconfiguration found by a check; `code` is express-rate-limit's (`ERR_ERL_…`). */
export class ValidationWarning extends TokenleaseError {}

const CODES: Record<CheckName, string> = {
  knownOptions: 'ERR_ERL_UNKNOWN_OPTION',
  trustProxy: 'ERR_ERL_PERMISSIVE_TRUST_PROXY',
  xForwardedForHeader: 'ERR_ERL_UNEXPECTED_X_FORWARDED_FOR',
  creationStack: 'ERR_ERL_CREATED_IN_REQUEST_HANDLER',
};

export class Checks {
  readonly #enabled: (name: CheckName) => boolean;
  readonly #logger: Logger | undefined;
  readonly #fired = new Set<CheckName>();

  constructor(validate: ValidateOptions | undefined, logger: Logger | undefined) {
    const v = validate ?? true;
    this.#enabled = typeof v === 'boolean' ? () => v : (name) => v[name] ?? v.default ?? true;
    this.#logger = logger;
  }

  /** Warns once for `name` when `failed` and the check is on. */
  check(name: CheckName, failed: () => boolean, message: () => string): void {
    if (this.#fired.has(name) || !this.#enabled(name) || !failed()) return;
    this.#fired.add(name);
    const warning = new ValidationWarning(CODES[name], `tokenlease: ${message()}`);
    if (this.#logger) this.#logger.error(warning);
    else process.emitWarning(warning);
  }

  /** Options nobody reads, e.g. `windowMS`: named with the option it probably means. */
  knownOptions(options: object, known: readonly string[]): void {
    for (const name of Object.keys(options)) {
      const meant = known.find((k) => k.toLowerCase() === name.toLowerCase());
      this.check(
        'knownOptions',
        () => !known.includes(name),
        () => `Unexpected configuration option: ${name}${meant ? ` (did you mean \`${meant}\`?)` : ''}`,
      );
    }
  }

  /** A limiter built while a request is handled counts nothing: each request gets a fresh one. */
  creationStack(): void {
    this.check(
      'creationStack',
      () => {
        const stack = new Error().stack ?? '';
        return stack.includes('Layer.handleRequest') || stack.includes('Layer.handle [as handle_request]');
      },
      () => 'the rate limiter should be created at app initialization, not when responding to a request.',
    );
  }
}
