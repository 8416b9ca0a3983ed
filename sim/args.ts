import { existsSync, readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { parseDuration as durationMs } from '../src/duration.js';
import type { PolicyConfig } from '../src/index.js';
import type { BalancerConfig } from './scenario.js';
import { POLICIES } from './suite.js';
import { type FieldMap, FORMATS, type LogFormat, parseFieldMap } from './traffic.js';

/** A problem with the command line: printed without a stack trace, exit code 2. */
export class UsageError extends Error {}

export const OPTIONS = {
  scenario: { type: 'string' },
  list: { type: 'boolean' },
  instances: { type: 'string' },
  'max-fraction': { type: 'string' },
  balancer: { type: 'string' },
  policy: { type: 'string' },
  plans: { type: 'string' },
  traffic: { type: 'string' },
  format: { type: 'string' },
  fields: { type: 'string' },
  duration: { type: 'string' },
  seed: { type: 'string' },
  json: { type: 'boolean' },
  out: { type: 'string' },
  redis: { type: 'string' },
  prefix: { type: 'string' },
  replay: { type: 'string' },
  strict: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

export type Values = ReturnType<typeof parse>['values'];

/**
 * node:util's parseArgs with two fixes for a CLI: a value that looks like a negative number
 * (`--duration -1`) is taken as the option's value, so validation can say what is wrong with it,
 * and an unknown option gets our message instead of Node's advice about positionals.
 */
export function parse(argv: readonly string[]) {
  const args: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const name = arg.startsWith('--') ? arg.slice(2) : undefined;
    const option = name === undefined ? undefined : OPTIONS[name as keyof typeof OPTIONS];
    const next = argv[i + 1];
    if (option?.type === 'string' && next !== undefined && /^-\d|^-\.\d/.test(next)) {
      args.push(`${arg}=${next}`);
      i++;
    } else {
      args.push(arg);
    }
  }
  try {
    return parseArgs({ args, strict: true, allowPositionals: true, options: OPTIONS });
  } catch (err) {
    const e = err as Error & { code?: string };
    if (e.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') {
      const unknown = /'([^']+)'/.exec(e.message)?.[1] ?? '';
      throw new UsageError(`unknown option ${unknown}`);
    }
    throw new UsageError(e.message);
  }
}

/** `--duration`: the library's durations (`30s`, `1.5m`, `2 h`), or a bare number of ms. */
export function parseDuration(text: string): number {
  try {
    return durationMs(/^\d+(\.\d+)?$/.test(text) ? Number(text) : text, '--duration');
  } catch {
    throw new UsageError(
      `--duration: expected a duration like 30s, 2m or 500ms, got ${JSON.stringify(text)}`,
    );
  }
}

export function parseBalancer(text: string): BalancerConfig | 'log' {
  const [kind, arg] = text.split(':', 2) as [string, string | undefined];
  switch (kind) {
    case 'round-robin':
    case 'rr':
      return { kind: 'round-robin' };
    case 'random':
    case 'sticky':
      return { kind };
    case 'zipf':
      return { kind, s: arg === undefined ? 1 : Number(arg) };
    case 'weighted':
      return { kind, weights: (arg ?? '').split(',').map(Number) };
    case 'log':
      return 'log';
    default:
      throw new UsageError(
        `--balancer: expected round-robin, random, sticky, zipf[:S], weighted:W1,W2,... or log (the log's instance column), got ${JSON.stringify(text)}`,
      );
  }
}

/** A policy name, policy JSON, or a file holding policy JSON. */
export function parsePolicy(text: string): PolicyConfig {
  const named = POLICIES[text];
  if (named) return named;
  let json = text;
  if (!text.trim().startsWith('{')) {
    if (!existsSync(text)) {
      throw new UsageError(
        `--policy: expected one of ${Object.keys(POLICIES).join(', ')}, a JSON object or a file with one, got ${JSON.stringify(text)}`,
      );
    }
    json = readFileSync(text, 'utf8');
  }
  try {
    return JSON.parse(json) as PolicyConfig;
  } catch (err) {
    throw new UsageError(`--policy: not valid JSON (${(err as Error).message})`);
  }
}

export function wholeNumber(text: string, option: string, min = 0): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n < min)
    throw new UsageError(`${option}: expected a whole number from ${min}, got ${JSON.stringify(text)}`);
  return n;
}

/** `--instances 20` or `5,10,20,50` (a fleet what-if). */
export function parseInstances(text: string, max: number): number[] {
  const counts = text.split(',').map((part) => {
    const n = Number(part.trim());
    if (!Number.isInteger(n) || n < 1 || n > max) {
      throw new UsageError(
        `--instances: expected a whole number from 1 to ${max} or a list like 5,10,20,50, got ${JSON.stringify(text)}`,
      );
    }
    return n;
  });
  return [...new Set(counts)].sort((a, b) => a - b);
}

/** `--max-fraction 0.02,0.05,0.1`: lease sizes to compare (fractions of the limit). */
export function parseFractions(text: string): number[] {
  const values = text.split(',').map((part) => {
    const f = Number(part.trim());
    if (!(f > 0 && f <= 1)) {
      throw new UsageError(
        `--max-fraction: expected fractions above 0 up to 1, e.g. 0.02,0.05,0.1, got ${JSON.stringify(text)}`,
      );
    }
    return f;
  });
  return [...new Set(values)].sort((a, b) => a - b);
}

export function parseFormat(text: string): LogFormat {
  if (!FORMATS.includes(text as LogFormat)) {
    throw new UsageError(`--format: expected one of ${FORMATS.join(', ')}, got ${JSON.stringify(text)}`);
  }
  return text as LogFormat;
}

export function parseFields(text: string): FieldMap {
  try {
    return parseFieldMap(text);
  } catch (err) {
    throw new UsageError(`--fields: ${(err as Error).message.replace(/^Invalid `fields`: /, '')}`);
  }
}
