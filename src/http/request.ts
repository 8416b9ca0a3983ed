import type { IncomingHttpHeaders } from 'node:http';

/** What the limiter reads from a request, whatever the framework. Adapters build it. */
export interface RequestView {
  method: string;
  /** Path without the query, as received (never percent-decoded, so bad escapes cannot throw). */
  path: string;
  /** The route pattern the framework matched (`/users/:id`), when it knows one. */
  routePattern?: string | undefined;
  headers: IncomingHttpHeaders;
  /** The socket peer; undefined once the socket is gone. */
  remoteAddress: string | undefined;
  /**
   * The client address as the framework resolved it under its own trusted-proxy setting (Express
   * `req.ip`, Fastify `request.ip`); used when the adapter has no `trustProxy` of its own.
   */
  clientAddress?: string | undefined;
}

/** The path of a request target: origin-form (`/a?b`) or absolute-form (`http://host/a?b`). */
export function pathOf(target: string | undefined): string {
  // Origin-form, what servers almost always get: the path is everything before `?` or `#`.
  if (target !== undefined && target.charCodeAt(0) === 47 /* / */) {
    const end = target.search(/[?#]/);
    return end < 0 ? target : target.slice(0, end);
  }
  let path = target ?? '/';
  const scheme = /^[a-z][a-z0-9+.-]*:\/\/[^/?#]*/i.exec(path);
  if (scheme) path = path.slice(scheme[0].length);
  const end = path.search(/[?#]/);
  if (end >= 0) path = path.slice(0, end);
  return path.startsWith('/') ? path : `/${path}`;
}

/** API keys are printable ASCII without spaces; anything else is treated as no key at all. */
const API_KEY = /^[\x21-\x7e]{1,256}$/;

/**
 * The API key from `header`, or undefined when it is missing, repeated (Node joins repeats with
 * `, `), longer than 256 characters or not printable ASCII.
 */
export function readApiKey(headers: IncomingHttpHeaders, header: string): string | undefined {
  const value = headers[header];
  return typeof value === 'string' && API_KEY.test(value) ? value : undefined;
}

/**
 * The one function that builds a limiter key from named parts, e.g.
 * `apiKey=k_123&route=POST /reports`. `%`, `&` and `=` in values are escaped, so different parts
 * can never produce the same key.
 */
export function buildKey(parts: readonly (readonly [string, string])[]): string {
  let key = '';
  for (const [name, value] of parts) key += `${key === '' ? '' : '&'}${keyPart(name, value)}`;
  return key;
}

/** One part of a key built by `buildKey`: `name=value`, the value escaped. */
export function keyPart(name: string, value: string): string {
  return `${name}=${escapePart(value)}`;
}

const RESERVED = /[%&=]/;

function escapePart(value: string): string {
  if (!RESERVED.test(value)) return value;
  // `%` first: the escapes of the others contain one.
  return value.replaceAll('%', '%25').replaceAll('&', '%26').replaceAll('=', '%3D');
}
