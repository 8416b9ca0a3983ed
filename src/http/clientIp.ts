import { isIP } from 'node:net';
import { ConfigError } from '../errors.js';

/**
 * Which peers may tell us the client's address in `X-Forwarded-For`:
 * - `false`: nobody; the socket peer is the client (a spoofed header changes nothing).
 * - a number `n`: the `n` nearest hops are our own proxies.
 * - a list of addresses, CIDR ranges (`10.0.0.0/8`) or the names `'loopback'`, `'linklocal'`,
 *   `'uniquelocal'`: peers in the list are proxies, whatever their position.
 * - `true`: every hop is trusted, so the left-most address wins. Only behind a proxy that
 *   overwrites the header, never on a public port.
 */
export type TrustProxy = boolean | number | readonly string[];

export interface ClientIpOptions {
  /** @default false */
  trustProxy?: TrustProxy;
  /**
   * IPv6 clients are counted by this prefix length, because one host usually owns a whole /64 and
   * could otherwise rotate addresses to get a fresh limit per request. `false` or 128 keeps them apart.
   * @default 64
   */
  ipv6Subnet?: number | false;
}

const PRESETS: Record<string, readonly string[]> = {
  loopback: ['127.0.0.0/8', '::1/128'],
  linklocal: ['169.254.0.0/16', 'fe80::/10'],
  uniquelocal: ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', 'fc00::/7'],
};

/** Longest `X-Forwarded-For` walk; longer chains cannot be our own proxies and are cut. */
const MAX_HOPS = 32;

/** Resolves the client address of a request, honouring trusted proxies, and groups IPv6 by prefix. */
export class ClientIp {
  readonly #trusted: (address: string, hop: number) => boolean;
  readonly #subnet: number;

  constructor(options: ClientIpOptions = {}) {
    this.#trusted = compileTrust(options.trustProxy ?? false);
    const subnet = options.ipv6Subnet ?? 64;
    if (subnet !== false && (!Number.isInteger(subnet) || subnet < 1 || subnet > 128)) {
      throw new ConfigError(
        'ipv6Subnet',
        `expected an integer from 1 to 128 or false, got ${String(subnet)}`,
      );
    }
    this.#subnet = subnet === false ? 128 : subnet;
  }

  /**
   * The client's address: the first hop, walking from the socket peer towards the client, that is
   * not a trusted proxy. Entries that are not IP addresses end the walk at the last good hop.
   * Undefined only when the socket has no address (it was already closed).
   */
  address(
    remoteAddress: string | undefined,
    forwardedFor: string | string[] | undefined,
  ): string | undefined {
    let current = normalize(remoteAddress);
    if (current === undefined || forwardedFor === undefined) return current;
    const header = Array.isArray(forwardedFor) ? forwardedFor.join(',') : forwardedFor;
    const hops = header.split(',');
    for (let hop = 0; hop < MAX_HOPS && hops.length > 0; hop++) {
      if (!this.#trusted(current, hop)) return current;
      const next = normalize(hops.pop()!.trim());
      if (next === undefined) return current;
      current = next;
    }
    return current;
  }

  /** The address as a limiter key part: IPv4 as is, IPv6 as its prefix (`2001:db8:1:2::/64`). */
  group(address: string): string {
    if (isIP(address) !== 6 || this.#subnet === 128) return address;
    return ipv6Prefix(address, this.#subnet);
  }
}

function compileTrust(trust: TrustProxy): (address: string, hop: number) => boolean {
  if (trust === true) return () => true;
  if (trust === false) return () => false;
  if (typeof trust === 'number') {
    if (!Number.isInteger(trust) || trust < 0) {
      throw new ConfigError('trustProxy', `expected a hop count (integer >= 0), got ${trust}`);
    }
    return (_address, hop) => hop < trust;
  }
  if (!Array.isArray(trust)) {
    throw new ConfigError('trustProxy', 'expected false, true, a hop count or a list of addresses/CIDRs');
  }
  const ranges = new IpRanges();
  trust.forEach((entry, i) => {
    for (const item of PRESETS[entry] ?? [entry]) ranges.add(item, `trustProxy[${i}]`);
  });
  return (address) => ranges.has(address);
}

/**
 * A set of IP addresses and CIDR ranges. (`net.BlockList` does the same but allocates a
 * SocketAddress per lookup, which showed up as the largest single cost of a request.)
 */
export class IpRanges {
  /** IPv4 ranges as [network, mask] of 32-bit numbers: the common case stays arithmetic. */
  readonly #v4: [number, number][] = [];
  readonly #v6: { words: number[]; bits: number }[] = [];

  get size(): number {
    return this.#v4.length + this.#v6.length;
  }

  /** Adds `1.2.3.4`, `10.0.0.0/8` or `2001:db8::/32`, naming `field` when it cannot. */
  add(entry: string, field: string): void {
    const [raw = '', bits, extra] = String(entry).split('/');
    const address = normalize(raw);
    const v4 = address !== undefined && isIP(address) === 4;
    const max = v4 ? 32 : 128;
    const prefix = bits === undefined ? max : Number(bits);
    if (
      address === undefined ||
      extra !== undefined ||
      !Number.isInteger(prefix) ||
      prefix < 0 ||
      prefix > max
    ) {
      throw new ConfigError(field, `expected an IP address or CIDR range, got ${JSON.stringify(entry)}`);
    }
    if (v4) {
      const mask = prefix === 0 ? 0 : (0xffffffff << (32 - prefix)) >>> 0;
      this.#v4.push([(ipv4Number(address) & mask) >>> 0, mask]);
    } else {
      this.#v6.push({ words: ipv6Words(address), bits: prefix });
    }
  }

  /** Whether a normalized address (see `normalize`) is in any range. */
  has(address: string): boolean {
    if (address.includes(':')) {
      if (this.#v6.length === 0) return false;
      const w = ipv6Words(address);
      return this.#v6.some((r) => samePrefix(r.words, w, r.bits));
    }
    if (this.#v4.length === 0) return false;
    const n = ipv4Number(address);
    return this.#v4.some(([network, mask]) => (n & mask) >>> 0 === network);
  }
}

function ipv4Number(address: string): number {
  let n = 0;
  for (const octet of address.split('.')) n = n * 256 + Number(octet);
  return n;
}

function samePrefix(a: readonly number[], b: readonly number[], bits: number): boolean {
  for (let i = 0; i * 16 < bits; i++) {
    const keep = Math.min(16, bits - i * 16);
    const mask = (0xffff << (16 - keep)) & 0xffff;
    if (((a[i] ?? 0) & mask) !== ((b[i] ?? 0) & mask)) return false;
  }
  return true;
}

/** Parses an IP address; strips an IPv6 zone and unwraps IPv4-mapped IPv6. Undefined if not an IP. */
export function normalize(raw: string | undefined): string | undefined {
  if (raw === undefined) return undefined;
  const address = raw.replace(/%.*$/, '').toLowerCase();
  const family = isIP(address);
  if (family === 4) return address;
  if (family !== 6) return undefined;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(address);
  return mapped ? mapped[1] : address;
}

/** `2001:db8:1:2:aaaa::1` with 64 bits -> `2001:db8:1:2::/64`. */
function ipv6Prefix(address: string, bits: number): string {
  const words = ipv6Words(address);
  const kept = Math.ceil(bits / 16);
  const out: string[] = [];
  for (let i = 0; i < kept; i++) {
    const keep = Math.min(16, bits - i * 16);
    const mask = keep === 16 ? 0xffff : (0xffff << (16 - keep)) & 0xffff;
    out.push(((words[i] ?? 0) & mask).toString(16));
  }
  return `${out.join(':')}${kept < 8 ? '::' : ''}/${bits}`;
}

/** The eight 16-bit words of a valid IPv6 address (validated by `isIP` before). */
function ipv6Words(address: string): number[] {
  let text = address;
  const v4 = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (v4) {
    const [a, b, c, d] = v4.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, v4.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = '', tail] = text.split('::');
  const parse = (part: string) => (part === '' ? [] : part.split(':').map((w) => Number.parseInt(w, 16)));
  const left = parse(head);
  if (tail === undefined) return left;
  const right = parse(tail);
  return [...left, ...new Array<number>(8 - left.length - right.length).fill(0), ...right];
}
