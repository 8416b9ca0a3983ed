import { ConfigError } from '../errors.js';
import { memoize } from './memo.js';

/**
 * Route patterns: an optional method, then a path whose segments are literals, `:name` (any one
 * segment) or a final `*` (the rest, possibly empty). `GET /users/:id`, `POST /reports/*`, `/health`.
 *
 * Matching errs on the side of counting (docs/http.md "Route matching"): a request is matched as
 * any upstream might route it, because a rule that an unusual spelling of a path escapes is a
 * bypass, while counting a request the upstream answers with 404 costs the client one token.
 * Literal segments compare case-insensitively (Express routes that way by default), a `GET`
 * pattern also matches `HEAD` (Express and Fastify answer HEAD with the GET handler), and paths
 * are normalised as upstreams do before routing (see `segmentsOf`).
 */
interface Pattern<T> {
  readonly pattern: string;
  readonly method: string | undefined;
  readonly segments: readonly string[];
  readonly rest: boolean;
  readonly value: T;
  /** Higher wins: method given, more literal segments, no trailing `*`. */
  readonly rank: number;
}

export interface RouteMatch<T> {
  /** The pattern as written in the table; used as the `route` key part. */
  pattern: string;
  value: T;
}

const METHOD = /^[A-Z]+$/;

/**
 * A request's paths split into segments once, for matching against several tables; split on first
 * use, so a request that meets no route table (no routes, no costs) never pays for it.
 */
export class SplitPaths {
  readonly #paths: readonly (string | undefined)[];
  #segments: readonly (readonly string[])[] | undefined;

  constructor(paths: readonly (string | undefined)[]) {
    this.#paths = paths;
  }

  get segments(): readonly (readonly string[])[] {
    this.#segments ??= this.#paths.flatMap((p) => (p === undefined ? [] : [pathSegments(p)]));
    return this.#segments;
  }
}

/** A table from route patterns to values, matched most-specific first. */
export class RouteTable<T> {
  readonly #patterns: Pattern<T>[];

  constructor(entries: Iterable<readonly [string, T]>, field: string) {
    this.#patterns = [...entries]
      .map(([pattern, value]) => compile(pattern, value, `${field}[${JSON.stringify(pattern)}]`))
      .sort((a, b) => b.rank - a.rank);
  }

  get size(): number {
    return this.#patterns.length;
  }

  /** The most specific pattern matching `method` and any of `paths` (tried in order). */
  match(method: string, paths: readonly (string | undefined)[] | SplitPaths): RouteMatch<T> | undefined {
    if (this.#patterns.length === 0) return undefined;
    const upper = method.toUpperCase();
    const split = paths instanceof SplitPaths ? paths.segments : new SplitPaths(paths).segments;
    for (const p of this.#patterns) {
      if (p.method !== undefined && p.method !== upper && !(p.method === 'GET' && upper === 'HEAD')) continue;
      if (split.some((segments) => matches(p, segments))) return { pattern: p.pattern, value: p.value };
    }
    return undefined;
  }
}

function compile<T>(pattern: string, value: T, field: string): Pattern<T> {
  const text = String(pattern).trim();
  const space = text.indexOf(' ');
  const method = space > 0 ? text.slice(0, space).toUpperCase() : undefined;
  const path = (space > 0 ? text.slice(space + 1) : text).trim();
  if ((method !== undefined && !METHOD.test(method)) || !path.startsWith('/')) {
    throw new ConfigError(field, "expected a route like '/path', 'GET /users/:id' or 'POST /reports/*'");
  }
  const segments = segmentsOf(path);
  const rest = segments.at(-1) === '*';
  if (rest) segments.pop();
  if (segments.includes('*')) throw new ConfigError(field, "'*' is only allowed as the last segment");
  const literals = segments.filter((s) => !s.startsWith(':')).length;
  const rank = (method ? 1 : 0) + literals * 2 + (rest ? 0 : 1) + segments.length * 0.01;
  return { pattern: text, method, segments, rest, value, rank };
}

function matches(p: Pattern<unknown>, segments: readonly string[]): boolean {
  if (p.rest ? segments.length < p.segments.length : segments.length !== p.segments.length) return false;
  return p.segments.every((s, i) => s.startsWith(':') || s === segments[i]);
}

/** The path as routing sees it (`//Users//42/` -> `/users/42`), so variants share a `route` key. */
export function normalizePath(path: string): string {
  return isNormal(path) ? path : `/${pathSegments(path).join('/')}`;
}

/**
 * `segmentsOf` of request paths, each split once: a gateway's clients ask for the same routes
 * again and again. Callers only read the arrays.
 */
const pathSegments: (path: string) => readonly string[] = memoize(segmentsOf, {
  size: 4096,
  maxKeyLength: 256,
});

/** Already what `normalizePath` makes of it (most requests): starts with `/`, and nothing to change. */
function isNormal(path: string): boolean {
  return path.charCodeAt(0) === 47 /* / */ && (path.length === 1 || !TO_NORMALISE.test(path));
}

/** What `segmentsOf` changes: escapes, `;params`, upper case, and empty, `.` or `..` segments. */
const TO_NORMALISE = /[%;A-Z]|\/(?:\/|\.|$)/;

const UNRESERVED = /^[A-Za-z0-9\-._~]$/;

/**
 * Path segments, normalised the way the upstreams a gateway forwards to do before they route
 * (RFC 3986 section 6 and common servers), so no spelling of a path escapes a rule:
 * - percent-escapes of unreserved characters are decoded (`/r%65ports` is `/reports`), and so is
 *   an encoded slash: `%2F` separates segments, as in servers that decode before routing (nginx);
 *   other escapes stay as they are;
 * - `;params` are dropped from every segment (`/reports;jsessionid=1`, as Tomcat and Spring do);
 * - empty segments (`//`, a trailing `/`) and `.` are dropped, `..` removes the segment before it
 *   (never above the root);
 * - letters are lower-cased (literal segments match case-insensitively).
 */
function segmentsOf(path: string): string[] {
  const decoded = path.replace(/%([0-9a-fA-F]{2})/g, (escaped, hex: string) => {
    const c = String.fromCharCode(Number.parseInt(hex, 16));
    return c === '/' || UNRESERVED.test(c) ? c : escaped;
  });
  const segments: string[] = [];
  for (const raw of decoded.split('/')) {
    const segment = (raw.split(';', 1)[0] ?? '').toLowerCase();
    if (segment === '..') segments.pop();
    else if (segment !== '' && segment !== '.') segments.push(segment);
  }
  return segments;
}
