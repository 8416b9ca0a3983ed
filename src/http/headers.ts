import { createHash } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { ConfigError, shown } from '../errors.js';

/**
 * Which `RateLimit` header syntax to send:
 * - `'draft-10'`: draft-ietf-httpapi-ratelimit-headers-10, every rule listed by name:
 *   `RateLimit-Policy: "per-key";q=100;w=1, "daily";q=1000000;w=86400` and
 *   `RateLimit: "per-key";r=42;t=1, "daily";r=999958;t=4`.
 * - `'draft-8'`, `'draft-7'`, `'draft-6'`: the forms express-rate-limit sends under those names
 *   (draft-7 and draft-6 carry one limit: the rule closest to refusing).
 */
export type StandardHeaders = 'draft-10' | 'draft-8' | 'draft-7' | 'draft-6';

const STANDARD: readonly (StandardHeaders | false)[] = [false, 'draft-10', 'draft-8', 'draft-7', 'draft-6'];

/** The `standardHeaders` option resolved: `true` is `'draft-6'` (as in express-rate-limit), unset is `fallback`. */
export function standardHeadersOption(
  value: StandardHeaders | boolean | undefined,
  fallback: StandardHeaders | false,
): StandardHeaders | false {
  const standard = value === true ? 'draft-6' : (value ?? fallback);
  if (!STANDARD.includes(standard)) {
    throw new ConfigError(
      'standardHeaders',
      `expected 'draft-10', 'draft-8', 'draft-7', 'draft-6', true or false, got ${shown(value)}`,
    );
  }
  return standard;
}

/** One rule of a request as the headers show it. */
export interface RuleState {
  /** The policy name clients see. */
  name: string;
  /** The client's partition (hashed into draft-8's partition key; never sent as is). */
  key: string;
  limit: number;
  windowSeconds: number;
  remaining: number;
  /**
   * Whole seconds until more quota is available (`t`); on a refused request, until this request
   * fits. Undefined when it never will (the request costs more than the limit).
   */
  resetSeconds: number | undefined;
  /** This rule refused the request. */
  violated: boolean;
}

export interface HeaderOptions {
  standard: StandardHeaders | false;
  legacy: boolean;
  /** Leave out what is left (public routes); limits, windows and reset times stay. */
  hideRemaining: boolean;
  /** Clock in ms, for the legacy header's absolute reset time. */
  now: number;
}

type Header = [name: string, value: string];

/**
 * The rate-limit headers for the rules of one request. `primary` is the rule single-limit forms
 * report: the one that refused, or else the one closest to refusing.
 */
export function rateLimitHeaders(
  states: readonly RuleState[],
  primary: RuleState,
  o: HeaderOptions,
): Header[] {
  // With remaining hidden, a refused request still names the rules that refused: r=0 reveals nothing.
  const shown = o.hideRemaining ? states.filter(isViolated) : states;
  let out: Header[] = [];
  switch (o.standard) {
    case 'draft-10': {
      // A literal, not pushes (an array grown by push gets room for 16): the default, every request.
      const policy = states.length === 1 ? policyHeader(states[0]!) : policyList(states);
      out = shown.length > 0 ? [policy, ['RateLimit', list(shown, serviceItem)]] : [policy];
      break;
    }
    case 'draft-8':
      out.push([
        'RateLimit-Policy',
        states
          .map((s) => `${sfString(s.name)}; q=${q(s)}; w=${s.windowSeconds}; pk=:${partitionKey(s.key)}:`)
          .join(', '),
      ]);
      if (shown.length > 0) {
        out.push(['RateLimit', shown.map((s) => serviceEntry(s, '; ')).join(', ')]);
      }
      break;
    case 'draft-7':
      out.push(['RateLimit-Policy', states.map((s) => `${q(s)};w=${s.windowSeconds}`).join(', ')]);
      if (shown.includes(primary)) {
        out.push(['RateLimit', `limit=${q(primary)}, remaining=${r(primary)}, reset=${reset(primary)}`]);
      }
      break;
    case 'draft-6':
      out.push(['RateLimit-Policy', states.map((s) => `${q(s)};w=${s.windowSeconds}`).join(', ')]);
      out.push(['RateLimit-Limit', String(q(primary))]);
      if (shown.includes(primary)) out.push(['RateLimit-Remaining', String(r(primary))]);
      if (primary.resetSeconds !== undefined) out.push(['RateLimit-Reset', String(primary.resetSeconds)]);
      break;
    case false:
      break;
  }
  if (o.legacy) {
    out.push(['X-RateLimit-Limit', String(q(primary))]);
    if (shown.includes(primary)) out.push(['X-RateLimit-Remaining', String(r(primary))]);
    if (primary.resetSeconds !== undefined) {
      out.push(['X-RateLimit-Reset', String(Math.ceil(o.now / 1000) + primary.resetSeconds)]);
    }
  }
  return out;
}

/**
 * `Retry-After` for a refused request: the latest time any refusing rule frees up, in whole seconds
 * rounded up, so it is never earlier than a `t` in the `RateLimit` header. Undefined when the
 * request can never pass.
 */
export function retryAfterSeconds(states: readonly RuleState[]): number | undefined {
  let latest = 1;
  for (const s of states) {
    if (!s.violated) continue;
    if (s.resetSeconds === undefined) return undefined;
    latest = Math.max(latest, s.resetSeconds);
  }
  return latest;
}

const isViolated = (s: RuleState) => s.violated;

/** A Structured Field list of `item` of each state, built without an intermediate array. */
function list(states: readonly RuleState[], item: (s: RuleState) => string): string {
  if (states.length === 0) return '';
  let out = item(states[0]!);
  for (let i = 1; i < states.length; i++) out += `, ${item(states[i]!)}`;
  return out;
}

/**
 * A `RateLimit` item of draft 10 (`separator` ';') or 8 ('; '): the rule's name and what is left, in
 * one template (draft 10's is built on every request).
 */
function serviceEntry(s: RuleState, separator: string): string {
  const name = sfString(s.name);
  return s.resetSeconds === undefined
    ? `${name}${separator}r=${r(s)}`
    : `${name}${separator}r=${r(s)}${separator}t=${s.resetSeconds}`;
}

const serviceItem = (s: RuleState) => serviceEntry(s, ';');

const q = (s: RuleState) => Math.floor(s.limit);

/**
 * Draft-10 `RateLimit-Policy` items by rule name, rebuilt only when the limit or window changes,
 * each with the header of a request meeting that rule alone: one frozen pair shared by every such
 * request, not a pair per request.
 */
const policyItems = new Map<string, { q: number; w: number; item: string; header: Header }>();

function policyEntry(s: RuleState): { item: string; header: Header } {
  const cached = policyItems.get(s.name);
  if (cached !== undefined && cached.q === q(s) && cached.w === s.windowSeconds) return cached;
  const item = `${sfString(s.name)};q=${q(s)};w=${s.windowSeconds}`;
  const entry = {
    q: q(s),
    w: s.windowSeconds,
    item,
    header: Object.freeze(['RateLimit-Policy', item]) as Header,
  };
  policyItems.set(s.name, entry);
  return entry;
}

const policyHeader = (s: RuleState): Header => policyEntry(s).header;
const policyItem = (s: RuleState): string => policyEntry(s).item;
const policyList = (states: readonly RuleState[]): Header => ['RateLimit-Policy', list(states, policyItem)];
const r = (s: RuleState) => Math.max(0, Math.floor(s.remaining));
const reset = (s: RuleState) => s.resetSeconds ?? s.windowSeconds;

/**
 * Rule names quoted as Structured Field strings. Names come from the configuration (rules and plans
 * files), so the cache stays as small as the configuration.
 */
const quoted = new Map<string, string>();

/** A Structured Field string (RFC 8941): printable ASCII with `"` and `\` escaped. */
function sfString(value: string): string {
  let s = quoted.get(value);
  if (s === undefined) {
    s = `"${value.replace(/[\\"]/g, (c) => `\\${c}`)}"`;
    quoted.set(value, s);
  }
  return s;
}

/** Draft-8's partition key as express-rate-limit derives it: never the raw client key. */
function partitionKey(key: string): string {
  const hex = createHash('sha256').update(key).digest('hex').slice(0, 12);
  return Buffer.from(hex).toString('base64');
}

/**
 * A list header's name as Node keys it (`getHeader` lower-cases the name it is given, and a name
 * already in lower case comes back as the same string, not a new one); undefined for the others.
 * The names are `rateLimitHeaders`' own, never a caller's: compared, not looked up in a Map, as
 * hashing them was half of setting the headers.
 */
function listName(name: string): string | undefined {
  if (name === 'RateLimit') return 'ratelimit';
  return name === 'RateLimit-Policy' ? 'ratelimit-policy' : undefined;
}

/**
 * `setRateLimitHeaders`, unless the response's headers are already out (then nothing is set).
 * `setHeader` throws once they are, so `headersSent` is read only then: on an Express response
 * (a hidden class of its own per request) looking the getter up costs every request more than
 * the rest of this.
 */
export function sendRateLimitHeaders(
  res: Pick<ServerResponse, 'getHeader' | 'setHeader' | 'headersSent'>,
  headers: readonly Header[],
): void {
  try {
    setRateLimitHeaders(res, headers);
  } catch (err) {
    if (!res.headersSent) throw err;
  }
}

/**
 * Sets the headers of a decision on a response. `RateLimit` and `RateLimit-Policy` of the
 * structured drafts (8, 10) are lists: a limiter stacked after another on the same response adds
 * its entries (as express-rate-limit does) instead of replacing them.
 */
export function setRateLimitHeaders(
  res: Pick<ServerResponse, 'getHeader' | 'setHeader'>,
  headers: readonly Header[],
): void {
  // Pairs read by index: destructuring them goes through the iterator protocol.
  let lists = false;
  for (let i = 0; i < headers.length; i++) {
    const header = headers[i]!;
    if (header[0] === 'RateLimit-Policy' && header[1].charCodeAt(0) === 34 /* " */) lists = true;
  }
  // Each method looked up once: on an Express response (a hidden class of its own per request)
  // every lookup is a miss of its own.
  const getHeader = res.getHeader;
  const setHeader = res.setHeader;
  for (let i = 0; i < headers.length; i++) {
    const header = headers[i]!;
    const name = header[0];
    const value = header[1];
    const listed = lists ? listName(name) : undefined;
    const earlier = listed === undefined ? undefined : getHeader.call(res, listed);
    setHeader.call(res, name, earlier === undefined ? value : [...[earlier].flat().map(String), value]);
  }
}
