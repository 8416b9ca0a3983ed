import { ConfigError } from './errors.js';

/** A duration: milliseconds as a number, or a string such as `'250ms'`, `'1.5s'`, `'1m'`, `'1h'`, `'1d'`. */
export type Duration = number | `${number}${DurationUnit}`;
export type DurationUnit = 'ms' | 's' | 'm' | 'h' | 'd';

const UNIT_MS: Record<DurationUnit, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const PATTERN = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)\s*$/;

/** Parses a positive duration to milliseconds, naming `field` in the error when it cannot. */
export function parseDuration(value: unknown, field: string): number {
  if (typeof value === 'number') {
    if (Number.isFinite(value) && value > 0) return value;
    throw new ConfigError(field, `expected a positive finite number of milliseconds, got ${String(value)}`);
  }
  if (typeof value === 'string') {
    const match = PATTERN.exec(value);
    if (match) {
      const ms = Number(match[1]) * UNIT_MS[match[2] as DurationUnit];
      if (ms > 0 && Number.isFinite(ms)) return ms;
    }
    throw new ConfigError(
      field,
      `expected a duration like '250ms', '1s', '1m', '1h' or '1d', got ${JSON.stringify(value)}`,
    );
  }
  throw new ConfigError(
    field,
    `expected a duration (number of ms or a string like '1s'), got ${typeof value}`,
  );
}
