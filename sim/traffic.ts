import { createReadStream } from 'node:fs';
import { extname } from 'node:path';
import { createInterface } from 'node:readline';
import { ConfigError } from '../src/index.js';

/**
 * Request logs for `--traffic`: JSON lines, CSV, nginx's combined format and Envoy's default
 * access-log format, read as a stream (one line at a time, whatever the file's length).
 */

/** One request of a log. */
export interface LogRecord {
  /** Absolute time in ms (only differences matter). */
  timeMs: number;
  key: string;
  cost: number;
  method?: string | undefined;
  path?: string | undefined;
  instance?: string | undefined;
  /** The client's IP address, for rules keyed `by: ip`. */
  ip?: string | undefined;
}

export const FORMATS = ['jsonl', 'csv', 'nginx', 'envoy'] as const;
export type LogFormat = (typeof FORMATS)[number];

/** What a record is made of; `--fields` maps each to a column of the log. */
export const FIELDS = ['time', 'key', 'cost', 'method', 'path', 'request', 'instance', 'ip'] as const;
export type Field = (typeof FIELDS)[number];
export type FieldMap = Partial<Record<Field, string>>;

/**
 * Columns tried for each field when `--fields` does not name one. `request` is an HTTP request
 * line ("GET /x HTTP/1.1") giving method and path at once.
 */
const DEFAULT_COLUMNS: Record<LogFormat, Record<Field, readonly string[]>> = {
  jsonl: {
    time: ['time', 'timestamp', 'ts', '@timestamp', 'start_time', 'time_iso8601', 'msec'],
    key: [
      'key',
      'client',
      'api_key',
      'apiKey',
      'client_key',
      'user',
      'user_id',
      'ip',
      'remote_addr',
      'client_ip',
    ],
    cost: ['cost', 'weight', 'tokens'],
    method: ['method', 'request_method'],
    path: ['path', 'route', 'uri', 'url'],
    request: ['request'],
    instance: ['instance', 'gateway', 'pod', 'node', 'hostname'],
    ip: ['ip', 'remote_addr', 'client_ip', 'x_forwarded_for'],
  },
  csv: {} as Record<Field, readonly string[]>,
  nginx: {
    time: ['time_local'],
    key: ['http_x_api_key', 'remote_addr'],
    cost: [],
    method: [],
    path: [],
    request: ['request'],
    instance: ['hostname'],
    ip: ['remote_addr'],
  },
  envoy: {
    time: ['start_time'],
    key: ['x_forwarded_for'],
    cost: [],
    method: [],
    path: [],
    request: ['request'],
    instance: [],
    ip: ['x_forwarded_for'],
  },
};
DEFAULT_COLUMNS.csv = DEFAULT_COLUMNS.jsonl;

/** Column names of the standard line formats; further columns are `$N` (1-based). */
const LINE_COLUMNS: Record<'nginx' | 'envoy', readonly string[]> = {
  // log_format combined: $remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent"
  // and, when appended, "$http_x_api_key" "$hostname" (the format docs/simulator.md suggests).
  nginx: [
    'remote_addr',
    'ident',
    'remote_user',
    'time_local',
    'request',
    'status',
    'body_bytes_sent',
    'http_referer',
    'http_user_agent',
    'http_x_api_key',
    'hostname',
  ],
  // Envoy's default format: [%START_TIME%] "%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%" ...
  envoy: [
    'start_time',
    'request',
    'response_code',
    'response_flags',
    'bytes_received',
    'bytes_sent',
    'duration',
    'upstream_service_time',
    'x_forwarded_for',
    'user_agent',
    'request_id',
    'authority',
    'upstream_host',
  ],
};

export interface LogOptions {
  /** @default detected from the extension or the first line */
  format?: LogFormat;
  fields?: FieldMap;
}

/** `key=api_key,time=ts` → a field map; errors name `--fields`. */
export function parseFieldMap(text: string): FieldMap {
  const map: FieldMap = {};
  for (const pair of text.split(',')) {
    const [field, column] = pair.split('=', 2).map((s) => s.trim());
    if (!FIELDS.includes(field as Field) || !column) {
      throw new ConfigError(
        'fields',
        `expected field=column pairs with fields ${FIELDS.join(', ')}, got ${JSON.stringify(pair)}`,
      );
    }
    map[field as Field] = column;
  }
  return map;
}

/** The format of a log, from its extension or its first line. */
export function detectFormat(path: string, firstLine: string): LogFormat {
  const ext = extname(path).toLowerCase();
  if (ext === '.jsonl' || ext === '.ndjson' || ext === '.json') return 'jsonl';
  if (ext === '.csv') return 'csv';
  const line = firstLine.trim();
  if (line.startsWith('{')) return 'jsonl';
  if (/^\[\d{4}-\d\d-\d\dT/.test(line)) return 'envoy';
  if (/^\S+ \S+ \S+ \[[^\]]+\] "/.test(line)) return 'nginx';
  return 'csv';
}

/** Splits a line of space-separated words, "quoted strings" and [bracketed] parts. */
function words(line: string): string[] {
  const out: string[] = [];
  const re = /"((?:[^"\\]|\\.)*)"|\[([^\]]*)\]|(\S+)/g;
  for (const m of line.matchAll(re)) out.push(m[1] ?? m[2] ?? m[3] ?? '');
  return out;
}

/** One CSV line (RFC 4180 quoting, no line breaks inside fields). */
function csvCells(line: string): string[] {
  const out: string[] = [];
  let cell = '';
  let quoted = false;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (quoted) {
      if (c === '"' && line[i + 1] === '"') {
        cell += '"';
        i++;
      } else if (c === '"') quoted = false;
      else cell += c;
    } else if (c === '"') quoted = true;
    else if (c === ',') {
      out.push(cell);
      cell = '';
    } else cell += c;
  }
  out.push(cell);
  return out;
}

const MONTHS: Record<string, number> = {
  Jan: 0,
  Feb: 1,
  Mar: 2,
  Apr: 3,
  May: 4,
  Jun: 5,
  Jul: 6,
  Aug: 7,
  Sep: 8,
  Oct: 9,
  Nov: 10,
  Dec: 11,
};

/**
 * A timestamp in ms and its resolution: epoch seconds or ms (numbers), ISO 8601, or nginx's
 * `10/Oct/2000:13:55:36 -0700`. Undefined when it is none of these.
 */
export function parseTime(value: unknown): { ms: number; resolutionMs: number } | undefined {
  if (typeof value === 'number' || (typeof value === 'string' && /^\d+(\.\d+)?$/.test(value.trim()))) {
    const n = Number(value);
    if (!Number.isFinite(n)) return undefined;
    const whole = Number.isInteger(n);
    // Epoch seconds until the year 5138; larger values are ms.
    if (n < 1e11) return { ms: n * 1000, resolutionMs: whole ? 1000 : 1 };
    return { ms: n, resolutionMs: 1 };
  }
  if (typeof value !== 'string') return undefined;
  const nginx = /^(\d\d)\/(\w{3})\/(\d{4}):(\d\d):(\d\d):(\d\d) ([+-])(\d\d)(\d\d)$/.exec(value.trim());
  if (nginx) {
    const [, d, mon, y, h, mi, s, sign, oh, om] = nginx;
    const month = MONTHS[mon!];
    if (month === undefined) return undefined;
    const offset = (sign === '-' ? -1 : 1) * (Number(oh) * 60 + Number(om)) * 60_000;
    return { ms: Date.UTC(+y!, month, +d!, +h!, +mi!, +s!) - offset, resolutionMs: 1000 };
  }
  const ms = Date.parse(value);
  if (Number.isNaN(ms)) return undefined;
  return { ms, resolutionMs: /[T ]\d\d:\d\d:\d\d[.,]\d/.test(value) ? 1 : 1000 };
}

/** A problem with one line of the log (the line is skipped). */
class LineError extends Error {}

type Row = (column: string) => unknown;

/** Builds a record from one row; throws LineError naming what is missing. */
function toRecord(row: Row, format: LogFormat, fields: FieldMap): LogRecord & { resolutionMs: number } {
  const pick = (field: Field): { column: string; value: unknown } | undefined => {
    const named = fields[field];
    const columns = named === undefined ? DEFAULT_COLUMNS[format][field] : [named];
    for (const column of columns) {
      const value = row(column);
      if (value !== undefined && value !== '' && value !== '-') return { column, value };
    }
    return undefined;
  };
  const expected = (field: Field) =>
    fields[field] ?? (DEFAULT_COLUMNS[format][field].join(' / ') || '(none)');
  const time = pick('time');
  const parsedTime = time && parseTime(time.value);
  if (!parsedTime) {
    throw new LineError(
      time
        ? `cannot read the time ${JSON.stringify(time.value)} in column \`${time.column}\``
        : `no time (column ${expected('time')}; name it with --fields time=COLUMN)`,
    );
  }
  const key = pick('key');
  if (!key)
    throw new LineError(`no client key (column ${expected('key')}; name it with --fields key=COLUMN)`);
  let cost = 1;
  const costValue = pick('cost');
  if (costValue) {
    cost = Number(costValue.value);
    if (!(cost > 0 && Number.isFinite(cost)))
      throw new LineError(
        `cost ${JSON.stringify(costValue.value)} in column \`${costValue.column}\` is not a positive number`,
      );
  }
  let method = pick('method')?.value as string | undefined;
  let path = pick('path')?.value as string | undefined;
  const request = pick('request')?.value;
  if (typeof request === 'string' && (method === undefined || path === undefined)) {
    const [m, p] = request.split(' ');
    method ??= m;
    path ??= p;
  }
  const instance = pick('instance')?.value;
  const ip = pick('ip');
  // X-Forwarded-For lists every hop: the client is the first.
  const firstHop = (column: string, value: unknown) =>
    column === 'x_forwarded_for' ? String(value).split(',')[0]!.trim() : String(value);
  return {
    timeMs: parsedTime.ms,
    resolutionMs: parsedTime.resolutionMs,
    key: firstHop(key.column, key.value),
    cost,
    method: method === undefined ? undefined : String(method),
    path: path === undefined ? undefined : String(path).split('?')[0],
    instance: instance === undefined ? undefined : String(instance),
    ip: ip === undefined ? undefined : firstHop(ip.column, ip.value),
  };
}

/** Lines the reader skipped, and the first reason. */
export interface SkippedLines {
  count: number;
  first: string | undefined;
}

/** Gives up when this many lines in a row from the start cannot be read: the format or mapping is wrong. */
const GIVE_UP_AFTER = 100;

/**
 * Streams a log's requests in time order as written. Lines that cannot be read are skipped and
 * counted in `skipped`; if none of the first 100 lines can be read, it throws a ConfigError
 * naming the file, line and reason. Requests stamped with the same whole second (nginx's
 * `$time_local`, ISO times without a fraction) are spread evenly over that second, in order, so a
 * second's traffic does not arrive as one burst.
 */
export async function* readLog(
  path: string,
  options: LogOptions = {},
  skipped: SkippedLines = { count: 0, first: undefined },
): AsyncGenerator<LogRecord> {
  const fields = options.fields ?? {};
  const lines = createInterface({ input: createReadStream(path), crlfDelay: Number.POSITIVE_INFINITY });
  let format = options.format;
  let header: string[] | undefined;
  let lineNo = 0;
  let read = 0;
  // Same-second requests waiting to be spread over their second.
  let group: (LogRecord & { resolutionMs: number })[] = [];
  const flush = function* () {
    const n = group.length;
    for (const [i, r] of group.entries()) {
      const { resolutionMs, ...rest } = r;
      yield n > 1 && resolutionMs > 1 ? { ...rest, timeMs: r.timeMs + (i * resolutionMs) / n } : rest;
    }
    group = [];
  };
  try {
    for await (const line of lines) {
      lineNo++;
      if (line.trim() === '') continue;
      format ??= detectFormat(path, line);
      let row: Row;
      try {
        if (format === 'csv') {
          if (!header) {
            header = csvCells(line).map((h) => h.trim());
            continue;
          }
          const cells = csvCells(line);
          const h = header;
          row = (column) => {
            const i = h.indexOf(column);
            return i < 0 ? undefined : cells[i];
          };
        } else if (format === 'jsonl') {
          let parsed: unknown;
          try {
            parsed = JSON.parse(line);
          } catch {
            throw new LineError('not a JSON object');
          }
          if (typeof parsed !== 'object' || parsed === null) throw new LineError('not a JSON object');
          const o = parsed as Record<string, unknown>;
          row = (column) => o[column];
        } else {
          const w = words(line);
          const names = LINE_COLUMNS[format];
          row = (column) => {
            const positional = /^\$(\d+)$/.exec(column);
            const i = positional ? Number(positional[1]) - 1 : names.indexOf(column);
            return i < 0 ? undefined : w[i];
          };
        }
        const record = toRecord(row, format, fields);
        read++;
        if (group.length > 0 && group[0]!.timeMs !== record.timeMs) yield* flush();
        group.push(record);
      } catch (err) {
        if (!(err instanceof LineError)) throw err;
        skipped.count++;
        const where = `${path}:${lineNo}: ${err.message} (format ${format})`;
        skipped.first ??= where;
        if (read === 0 && skipped.count >= GIVE_UP_AFTER)
          throw new ConfigError('traffic', `${where}; no line could be read`);
      }
    }
    yield* flush();
    if (read === 0) {
      throw new ConfigError('traffic', skipped.first ?? `${path}: the log has no requests`);
    }
  } finally {
    lines.close();
  }
}
