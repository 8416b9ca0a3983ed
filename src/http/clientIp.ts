import { isIP } from 'node:net';
import { ConfigError, shown } from '../errors.js';
import { memoize } from './memo.js';

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
  /** Whether a hop is a trusted proxy; `address` is undefined for a peer without one (a unix socket). */
  readonly #trusted: (address: string | undefined, hop: number) => boolean;
  /** `group`'s answers: a busy gateway's clients come back again and again. */
  readonly #groups: (address: string) => string;

  constructor(options: ClientIpOptions = {}) {
    this.#trusted = compileTrust(options.trustProxy ?? false);
    const subnet = options.ipv6Subnet ?? 64;
    if (subnet !== false && (!Number.isInteger(subnet) || subnet < 1 || subnet > 128)) {
      throw new ConfigError(
        'ipv6Subnet',
        `expected an integer from 1 to 128 or false, got ${String(subnet)}`,
      );
    }
    this.#groups = memoize((address) => ipKey(address, subnet), ADDRESSES);
  }

  /**
   * The client's address: the first hop, walking from the socket peer towards the client, that is
   * not a trusted proxy. Entries that are not IP addresses end the walk at the last good hop.
   * A socket without an address (a unix-domain socket, or one already closed) is trusted as
   * Express's `trust proxy` trusts it: by `true` and a hop count, not by a list of addresses.
   * Undefined when no hop says who the client is.
   */
  address(
    remoteAddress: string | undefined,
    forwardedFor: string | string[] | undefined,
  ): string | undefined {
    let current = parseHop(remoteAddress);
    if (forwardedFor === undefined) return current;
    const header = Array.isArray(forwardedFor) ? forwardedFor.join(',') : forwardedFor;
    const hops = header.split(',');
    for (let hop = 0; hop < MAX_HOPS && hops.length > 0; hop++) {
      if (!this.#trusted(current, hop)) return current;
      const next = parseHop(hops.pop()!.trim());
      if (next === undefined) return current;
      current = next;
    }
    return current;
  }

  /** The address (from `address` or `normalize`) as a limiter key part: see `ipKey`. */
  group(address: string): string {
    return this.#groups(address);
  }
}

/**
 * A normalized address as a key: IPv4 as is; IPv6 as its network in CIDR form
 * (`2001:db8:1:2::/64`), or with `false` the whole address, always written canonically so every
 * spelling of one address is one key.
 */
export function ipKey(address: string, ipv6Subnet: number | false): string {
  if (isIP(address) !== 6) return address;
  const words = ipv6Words(address);
  if (ipv6Subnet === false) return canonicalIpv6(words);
  const network = words.map((word, i) => {
    const keep = Math.max(0, Math.min(16, ipv6Subnet - i * 16));
    return keep === 0 ? 0 : word & ((0xffff << (16 - keep)) & 0xffff);
  });
  return `${canonicalIpv6(network)}/${ipv6Subnet}`;
}

function compileTrust(trust: TrustProxy): (address: string | undefined, hop: number) => boolean {
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
  return (address) => address !== undefined && ranges.has(address);
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
      throw new ConfigError(field, `expected an IP address or CIDR range, got ${shown(entry)}`);
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

/**
 * Parses an IP address: strips an IPv6 zone, unwraps IPv4-mapped IPv6 (`::ffff:1.2.3.4` and
 * `::ffff:102:304` alike) and the deprecated IPv4-compatible dotted form (`::1.2.3.4`), and writes
 * IPv6 in its canonical form (RFC 5952), so every spelling of one address is one string.
 * Undefined if not an IP.
 */
export function normalize(raw: string | undefined): string | undefined {
  if (raw === undefined) return undefined;
  const address = raw.replace(/%.*$/, '').toLowerCase();
  const family = isIP(address);
  if (family === 4) return address;
  if (family !== 6) return undefined;
  const w = ipv6Words(address);
  const zeros = w[0] === 0 && w[1] === 0 && w[2] === 0 && w[3] === 0 && w[4] === 0;
  // Mapped is decided by the bits; IPv4-compatible by the notation, because `::1` and `::` share
  // its range without embedding an IPv4 address (express-rate-limit draws the same line).
  const mapped = zeros && w[5] === 0xffff;
  const compatible = zeros && w[5] === 0 && /^::\d+\.\d+\.\d+\.\d+$/.test(address);
  if (mapped || compatible) return `${w[6]! >> 8}.${w[6]! & 0xff}.${w[7]! >> 8}.${w[7]! & 0xff}`;
  return canonicalIpv6(w);
}

/**
 * One hop of a client address as proxies write it: an address, or one with a port appended
 * (`203.0.113.7:4711`, `[2001:db8::7]:4711`, as Azure Application Gateway sends them), or a
 * bracketed IPv6 address. Undefined if not an IP.
 */
export function parseHop(raw: string | undefined): string | undefined {
  return raw === undefined ? undefined : hops(raw);
}

/**
 * How many addresses `parseHop` and `ClientIp.group` keep the answer for, and the longest they
 * keep (an IPv6 address with a zone, brackets and a port is well under it).
 */
const ADDRESSES = { size: 4096, maxKeyLength: 64 };

/** A gateway's clients (and proxies) come back again and again: each hop parsed once, not once per request. */
const hops = memoize(parseHopUncached, ADDRESSES);

function parseHopUncached(raw: string): string | undefined {
  const bracketed = /^\[([^\]]+)\](?::\d{1,5})?$/.exec(raw);
  if (bracketed) return normalize(bracketed[1]);
  const v4WithPort = /^(\d{1,3}(?:\.\d{1,3}){3}):\d{1,5}$/.exec(raw);
  return normalize(v4WithPort ? v4WithPort[1] : raw);
}

/** RFC 5952: lower-case hex without leading zeros, the longest run (2+) of zero words as `::`. */
function canonicalIpv6(words: readonly number[]): string {
  let best = -1;
  let bestLength = 1;
  for (let i = 0; i < 8; ) {
    let j = i;
    while (j < 8 && words[j] === 0) j++;
    if (j - i > bestLength) {
      best = i;
      bestLength = j - i;
    }
    i = j === i ? i + 1 : j;
  }
  const hex = words.map((w) => w.toString(16));
  if (best < 0) return hex.join(':');
  return `${hex.slice(0, best).join(':')}::${hex.slice(best + bestLength).join(':')}`;
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
