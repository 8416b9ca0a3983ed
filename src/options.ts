import { ConfigError, shown, type TokenleaseError } from './errors.js';

/**
 * Refuses an option not in `known`, naming it as `<field>.<option>` (just `<option>` at the top
 * level): a typo in plain JS or a config file would otherwise leave a default silently in force.
 * Constructors throw a `ConfigError`; a call's options argument (`acquire`, `wait`) an `ArgumentError`.
 */
export function knownOptions(
  value: object,
  known: readonly string[],
  field?: string,
  error: new (field: string, message: string) => TokenleaseError = ConfigError,
): void {
  for (const option of Object.keys(value)) {
    if (!known.includes(option)) {
      const expected = known.map((k) => `\`${k}\``).join(', ');
      const name = field === undefined ? option : `${field}.${option}`;
      throw new error(name, `unknown option; expected one of ${expected}`);
    }
  }
}

/**
 * An option that counts something (keys, failures, instances, items): an integer from 1, at most
 * `max`. `why`, when given, says in the message what the bound protects.
 */
/** Whether `value` can hold options: an object, not `null` nor a list (both are `typeof 'object'`). */
export function isOptionsObject(value: unknown): value is object {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function countOption(value: unknown, field: string, max = Number.POSITIVE_INFINITY, why = ''): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > max) {
    const range = max === Number.POSITIVE_INFINITY ? 'from 1 and up' : `from 1 to ${max}`;
    throw new ConfigError(field, `expected an integer ${range}${why && ` (${why})`}, got ${shown(value)}`);
  }
  return value;
}

/**
 * Refuses an option set to `null`, naming it as `knownOptions` does. `null` never stands for the
 * default (policies refuse it too): an empty value in a config file would otherwise run a default
 * nobody chose. Leave the option out instead.
 */
export function noNullOptions(value: object, field?: string): void {
  for (const [option, v] of Object.entries(value)) {
    if (v !== null) continue;
    const name = field === undefined ? option : `${field}.${option}`;
    throw new ConfigError(name, 'got null; leave the option out for its default');
  }
}
