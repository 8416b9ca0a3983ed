import { MAX_TTL_MS } from './algorithms/tokenBucket.js';
import { ConfigError, shown } from './errors.js';

/**
 * A duration: milliseconds as a number, or a string such as `'250ms'`, `'1.5s'`, `'1m'`, `'1h'`, `'1d'`:
 * a decimal number, at most one space (`'1 s'`, as @upstash/ratelimit writes them), then a unit.
 * Every duration option accepts 1 ms to `MAX_DURATION_MS` (about 31.7 years); the ones a timer waits
 * for (`maxWait`, `breaker.coolDown`) at most `MAX_TIMER_MS` (about 24.9 days).
 */
export type Duration = number | `${number}${DurationUnit}`;
export type DurationUnit = 'ms' | 's' | 'm' | 'h' | 'd';

/** The durations an option accepts, in ms (both ends included). */
export interface DurationRange {
  readonly min: number;
  readonly max: number;
}

/** Shortest duration: Redis expires keys in whole milliseconds, and windows are aligned to them. */
export const MIN_DURATION_MS = 1;
/**
 * Longest window, period or TTL (1e12 ms, about 31.7 years). It is a tenth of `MAX_TTL_MS`, the
 * cap on a stored key's TTL, so a key that lives for two windows (a sliding window's) still expires
 * on its own schedule rather than at the cap.
 */
export const MAX_DURATION_MS = MAX_TTL_MS / 10;
/** Longest delay a Node timer keeps (about 24.8 days); a longer one fires after 1 ms. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** What windows, periods and TTLs accept. */
export const STORED: DurationRange = { min: MIN_DURATION_MS, max: MAX_DURATION_MS };
/** What a duration that a timer waits for accepts (a cool-down, a wait). */
export const TIMED: DurationRange = { min: MIN_DURATION_MS, max: MAX_TIMER_MS };

const UNIT_MS: Record<DurationUnit, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
// No other whitespace, exponent, case or long unit name: '1 minute' or '1S' (which @lukeed/ms
// reads) and '1e3ms' are refused rather than read one way here and another way elsewhere.
const PATTERN = /^(\d+(?:\.\d+)?) ?(ms|s|m|h|d)$/;

/**
 * Parses a duration to milliseconds within `range`, naming `field` and the accepted range in the
 * error when it cannot.
 */
export function parseDuration(value: unknown, field: string, range: DurationRange = STORED): number {
  const ms = toMs(value, field);
  if (!(ms >= range.min && ms <= range.max)) {
    throw new ConfigError(
      field,
      `expected a duration from ${describe(range.min)} to ${describe(range.max)}, got ${ms} ms`,
    );
  }
  return ms;
}

function toMs(value: unknown, field: string): number {
  if (typeof value === 'number') {
    if (Number.isFinite(value) && value > 0) return value;
    throw new ConfigError(field, `expected a positive finite number of milliseconds, got ${shown(value)}`);
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

/** `1 ms`, `2147483647 ms (about 24.9 days)`, `1000000000000 ms (about 31.7 years)`. */
function describe(ms: number): string {
  const days = ms / UNIT_MS.d;
  if (days < 1) return `${ms} ms`;
  const about = days < 365 ? `${days.toFixed(1)} days` : `${(days / 365.25).toFixed(1)} years`;
  return `${ms} ms (about ${about})`;
}

/** Latest time a `Date` can hold, in ms: a clock reading past it is not a time. */
const MAX_TIME_MS = 8.64e15;

/**
 * A `now` option: absent, or a function returning milliseconds. It is read once here: a function
 * returning something else (a BigInt from `process.hrtime.bigint`, NaN, a string) or throwing
 * (`performance.now` unbound) would otherwise turn every decision into a TypeError or a denial
 * with `remaining: NaN`.
 */
export function clockOption(now: unknown): (() => number) | undefined {
  if (now === undefined) return undefined;
  if (typeof now !== 'function') throw new ConfigError('now', 'expected a function returning milliseconds');
  let reading: unknown;
  try {
    reading = now();
  } catch (err) {
    // `now: performance.now` is the usual way here: called unbound, it throws.
    throw new ConfigError(
      'now',
      `expected a function returning milliseconds; calling it threw (${err instanceof Error ? err.message : String(err)}): pass an arrow function such as \`() => performance.now()\``,
    );
  }
  if (typeof reading !== 'number' || !(reading >= 0 && reading <= MAX_TIME_MS)) {
    throw new ConfigError(
      'now',
      `expected a function returning milliseconds (a number from 0 to ${MAX_TIME_MS}), it returned ${shown(reading)}`,
    );
  }
  return now as () => number;
}
