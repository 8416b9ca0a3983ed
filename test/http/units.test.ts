import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  buildKey,
  ClientIp,
  IpRanges,
  pathOf,
  RouteTable,
  type RuleState,
  rateLimitHeaders,
  readApiKey,
  retryAfterSeconds,
  rolloutPosition,
} from '../../src/http/index.js';
import { normalizePath } from '../../src/http/routes.js';

describe('ClientIp', () => {
  it.each([
    ['no trust: the peer, whatever the header says', false, '10.0.0.1', '1.1.1.1, 2.2.2.2', '10.0.0.1'],
    ['one trusted hop: the address our proxy saw', 1, '10.0.0.1', 'spoofed, 2.2.2.2', '2.2.2.2'],
    ['two hops', 2, '10.0.0.1', 'spoofed, 3.3.3.3, 10.0.0.2', '3.3.3.3'],
    ['hop count beyond the chain: the left-most', 5, '10.0.0.1', '3.3.3.3, 10.0.0.2', '3.3.3.3'],
    [
      'trusted list: skips every trusted hop',
      ['10.0.0.0/8'],
      '10.0.0.1',
      '4.4.4.4, 10.9.9.9, 10.0.0.2',
      '4.4.4.4',
    ],
    ['trusted list: an untrusted peer is the client', ['10.0.0.0/8'], '5.5.5.5', '4.4.4.4', '5.5.5.5'],
    [
      'garbage ends the walk at the last good hop',
      ['loopback'],
      '127.0.0.1',
      '4.4.4.4, nonsense',
      '127.0.0.1',
    ],
    ['IPv4-mapped IPv6 peers are IPv4', ['loopback'], '::ffff:127.0.0.1', '6.6.6.6', '6.6.6.6'],
    ['zones are dropped', false, 'fe80::1%eth0', undefined, 'fe80::1'],
  ])('%s', (_name, trustProxy, peer, header, expected) => {
    const ip = new ClientIp({ trustProxy: trustProxy as never });
    expect(ip.address(peer, header)).toBe(expected);
  });

  it.each([
    ['2001:db8:1:2:3:4:5:6', 64, '2001:db8:1:2::/64'],
    ['2001:DB8:1:2::ffff', 64, '2001:db8:1:2::/64'],
    ['::1', 64, '::/64'],
    ['2001:db8:1:2ff::1', 56, '2001:db8:1:200::/56'],
    ['2001:db8::1.2.3.4', 128, '2001:db8::102:304/128'],
    ['2001:db8::1', false, '2001:db8::1'],
    ['192.0.2.1', 64, '192.0.2.1'],
  ])('groups %s by /%s', (address, subnet, expected) => {
    expect(new ClientIp({ ipv6Subnet: subnet as number | false }).group(address)).toBe(expected);
  });

  it.each([
    ['10.0.0.0/8', '10.255.1.2', true],
    ['10.0.0.0/8', '11.0.0.1', false],
    ['192.0.2.7', '192.0.2.7', true],
    ['192.0.2.7', '192.0.2.8', false],
    ['0.0.0.0/0', '203.0.113.9', true],
    ['172.16.0.0/12', '172.31.255.255', true],
    ['172.16.0.0/12', '172.32.0.0', false],
    ['2001:db8::/32', '2001:db8:ffff::1', true],
    ['2001:db8::/32', '2001:db9::1', false],
    ['fe80::/10', 'febf::1', true],
    ['2001:db8::/32', '10.0.0.1', false],
    ['::ffff:10.0.0.0/104', '10.1.2.3', false],
  ])('range %s contains %s: %s', (range, address, expected) => {
    if (range.startsWith('::ffff:')) {
      expect(() => new IpRanges().add(range, 'r'), 'IPv4-mapped ranges are IPv4 ranges (max /32)').toThrow(
        'Invalid `r`',
      );
      return;
    }
    const ranges = new IpRanges();
    ranges.add(range, 'r');
    expect(ranges.has(address)).toBe(expected);
  });

  it('rejects bad settings naming the option', () => {
    expect(() => new ClientIp({ ipv6Subnet: 0 })).toThrow('Invalid `ipv6Subnet`');
    expect(() => new ClientIp({ trustProxy: ['10.0.0.0/33'] })).toThrow('Invalid `trustProxy[0]`');
    expect(() => new ClientIp({ trustProxy: -1 })).toThrow('Invalid `trustProxy`');
  });
});

describe('request parsing', () => {
  it('reads only well-formed API keys', () => {
    expect(readApiKey({ 'x-api-key': 'k_1' }, 'x-api-key')).toBe('k_1');
    expect(readApiKey({ 'x-api-key': 'a, b' }, 'x-api-key'), 'repeated header').toBeUndefined();
    expect(readApiKey({ 'x-api-key': 'k'.repeat(257) }, 'x-api-key'), 'too long').toBeUndefined();
    expect(readApiKey({ 'x-api-key': 'k\u00e9' }, 'x-api-key'), 'non-ASCII').toBeUndefined();
    expect(readApiKey({}, 'x-api-key')).toBeUndefined();
  });

  it('takes the path of origin- and absolute-form targets without decoding', () => {
    expect(pathOf('/a/b?x=1#f')).toBe('/a/b');
    expect(pathOf('http://example.com:8080/a%ff?x')).toBe('/a%ff');
    expect(pathOf(undefined)).toBe('/');
    expect(pathOf('*')).toBe('/*');
  });

  it('escapes %, & and = in key values, percent-encoded', () => {
    expect(buildKey([['client', 'ip=10.0.0.1']])).toBe('client=ip%3D10.0.0.1');
    expect(
      buildKey([
        ['apiKey', 'a%26b&c=d'],
        ['route', 'GET /x'],
      ]),
    ).toBe('apiKey=a%2526b%26c%3Dd&route=GET /x');
  });

  it('builds keys that never collide', () => {
    const parts = fc.array(fc.tuple(fc.constantFrom('apiKey', 'ip', 'route'), fc.string()), {
      minLength: 1,
      maxLength: 3,
    });
    fc.assert(
      fc.property(parts, parts, (a, b) => {
        fc.pre(JSON.stringify(a) !== JSON.stringify(b));
        expect(buildKey(a)).not.toBe(buildKey(b));
      }),
    );
  });
});

describe('RouteTable', () => {
  const table = new RouteTable(
    [
      ['/reports/*', 'any report'],
      ['POST /reports/generate', 'generate'],
      ['GET /users/:id', 'user'],
      ['/users/me', 'me'],
    ],
    'costs',
  );
  it.each([
    ['POST', '/reports/generate', 'generate'],
    ['GET', '/reports/generate', 'any report'],
    ['GET', '/reports', 'any report'],
    ['GET', '/users/42', 'user'],
    ['GET', '/users/me', 'me'],
    ['GET', '//users//me/', 'me'],
    ['POST', '/r%65ports/gener%61te', 'generate'],
    ['GET', '/users/42/extra', undefined],
  ])('%s %s -> %s', (method, path, expected) => {
    expect(table.match(method, [path])?.value).toBe(expected);
  });

  it('rejects malformed patterns naming the entry', () => {
    expect(() => new RouteTable([['reports', 1]], 'costs')).toThrow('Invalid `costs["reports"]`');
    expect(() => new RouteTable([['/a/*/b', 1]], 'costs')).toThrow("'*' is only allowed as the last segment");
  });
});

describe('normalizePath', () => {
  it.each([
    ['/', '/'],
    ['', '/'],
    ['/a/b', '/a/b'],
    ['/a/b/', '/a/b'],
    ['//a//b', '/a/b'],
    ['/%61/b', '/a/b'],
    ['/a%2Fb', '/a/b'],
    ['/a%3Bb', '/a%3bb'],
    ['a/b', '/a/b'],
    ['/A/b;x=1/./c/../d', '/a/b/d'],
    ['/.well-known', '/.well-known'],
  ])('%j -> %j', (path, expected) => {
    expect(normalizePath(path)).toBe(expected);
  });

  it('gives what the upstream normalisation gives, for any path (the fast path included)', () => {
    // Decode unreserved escapes and %2F, drop ;params, lower-case, resolve empty and dot segments.
    const model = (path: string) => {
      const decoded = path.replace(/%([0-9a-fA-F]{2})/g, (e, hex: string) => {
        const c = String.fromCharCode(Number.parseInt(hex, 16));
        return /[A-Za-z0-9\-._~/]/.test(c) ? c : e;
      });
      const out: string[] = [];
      for (const raw of decoded.split('/')) {
        const s = raw.replace(/;.*$/, '').toLowerCase();
        if (s === '..') out.pop();
        else if (s !== '' && s !== '.') out.push(s);
      }
      return `/${out.join('/')}`;
    };
    const piece = fc.constantFrom(
      '/',
      '//',
      'a',
      'Users',
      '42',
      '%61',
      '%2F',
      '%7e',
      '%',
      '.',
      '..',
      ';x',
      '-',
    );
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 8 }), (pieces) => {
        const path = pieces.join('');
        expect(normalizePath(path)).toBe(model(path));
      }),
    );
  });
});

describe('rate-limit headers', () => {
  const perKey: RuleState = {
    name: 'per-key',
    key: 'apiKey=k',
    limit: 100,
    windowSeconds: 1,
    remaining: 42,
    resetSeconds: 1,
    violated: false,
  };
  const daily: RuleState = {
    ...perKey,
    name: 'daily',
    limit: 1_000_000,
    windowSeconds: 86_400,
    remaining: 999_000,
    resetSeconds: 87,
  };
  const headers = (standard: 'draft-10' | 'draft-8' | 'draft-7' | 'draft-6' | false, extra = {}) =>
    Object.fromEntries(
      rateLimitHeaders([perKey, daily], perKey, {
        standard,
        legacy: false,
        hideRemaining: false,
        now: 1_700_000_000_000,
        ...extra,
      }),
    );

  it('draft-10 follows a rule whose limit or window changes (setPolicies, calendar windows)', () => {
    const policyOf = (s: RuleState) =>
      Object.fromEntries(
        rateLimitHeaders([s], s, { standard: 'draft-10', legacy: false, hideRemaining: false, now: 0 }),
      )['RateLimit-Policy'];
    expect(policyOf({ ...perKey, name: 'changing' })).toBe('"changing";q=100;w=1');
    expect(policyOf({ ...perKey, name: 'changing', limit: 50 })).toBe('"changing";q=50;w=1');
    expect(policyOf({ ...perKey, name: 'changing', limit: 50, windowSeconds: 2 })).toBe(
      '"changing";q=50;w=2',
    );
    expect(policyOf({ ...perKey, name: 'say "hi"' })).toBe('"say \\"hi\\"";q=100;w=1');
  });

  it('draft-10 lists every rule', () => {
    expect(headers('draft-10')).toEqual({
      'RateLimit-Policy': '"per-key";q=100;w=1, "daily";q=1000000;w=86400',
      RateLimit: '"per-key";r=42;t=1, "daily";r=999000;t=87',
    });
  });

  it('draft-8, draft-7 and draft-6 in the forms express-rate-limit sends', () => {
    // draft-8's pk: base64 of the first 12 hex digits of sha256(key), as express-rate-limit does.
    expect(headers('draft-8')).toEqual({
      'RateLimit-Policy':
        '"per-key"; q=100; w=1; pk=:ZjBmMjJkYjk4NjRl:, "daily"; q=1000000; w=86400; pk=:ZjBmMjJkYjk4NjRl:',
      RateLimit: '"per-key"; r=42; t=1, "daily"; r=999000; t=87',
    });
    expect(headers('draft-7')).toEqual({
      'RateLimit-Policy': '100;w=1, 1000000;w=86400',
      RateLimit: 'limit=100, remaining=42, reset=1',
    });
    expect(headers('draft-6')).toEqual({
      'RateLimit-Policy': '100;w=1, 1000000;w=86400',
      'RateLimit-Limit': '100',
      'RateLimit-Remaining': '42',
      'RateLimit-Reset': '1',
    });
  });

  it('legacy X-RateLimit-* with the reset as Unix seconds', () => {
    expect(headers(false, { legacy: true })).toEqual({
      'X-RateLimit-Limit': '100',
      'X-RateLimit-Remaining': '42',
      'X-RateLimit-Reset': '1700000001',
    });
  });

  it('hides remaining but keeps limits and reset', () => {
    expect(headers('draft-10', { hideRemaining: true })).toEqual({
      'RateLimit-Policy': '"per-key";q=100;w=1, "daily";q=1000000;w=86400',
    });
    expect(headers('draft-6', { hideRemaining: true, legacy: true })).toEqual({
      'RateLimit-Policy': '100;w=1, 1000000;w=86400',
      'RateLimit-Limit': '100',
      'RateLimit-Reset': '1',
      'X-RateLimit-Limit': '100',
      'X-RateLimit-Reset': '1700000001',
    });
  });

  it('escapes quotes in names and leaves t out when a request can never pass', () => {
    const odd: RuleState = {
      ...perKey,
      name: 'a "b" \\c',
      remaining: 0,
      resetSeconds: undefined,
      violated: true,
    };
    expect(
      Object.fromEntries(
        rateLimitHeaders([odd], odd, { standard: 'draft-10', legacy: false, hideRemaining: false, now: 0 }),
      ),
    ).toEqual({
      'RateLimit-Policy': '"a \\"b\\" \\\\c";q=100;w=1',
      RateLimit: '"a \\"b\\" \\\\c";r=0',
    });
    expect(retryAfterSeconds([odd])).toBeUndefined();
  });

  it('Retry-After is the latest t of the refusing rules and at least 1', () => {
    const refused = (t: number): RuleState => ({ ...perKey, remaining: 0, resetSeconds: t, violated: true });
    expect(retryAfterSeconds([refused(3), refused(7), { ...daily, resetSeconds: 100 }])).toBe(7);
    expect(retryAfterSeconds([refused(0)])).toBe(1);
  });
});

describe('rollout', () => {
  it('is deterministic, monotone in the percentage and close to uniform', () => {
    const keys = Array.from({ length: 10_000 }, (_, i) => `ip=10.0.${i >> 8}.${i & 255}`);
    const positions = keys.map(rolloutPosition);
    expect(keys.map(rolloutPosition), 'same key, same place').toEqual(positions);
    const share = (pct: number) => positions.filter((p) => p < pct).length / keys.length;
    expect(share(25)).toBeGreaterThan(0.23);
    expect(share(25)).toBeLessThan(0.27);
    expect(positions.every((p) => p >= 0 && p < 100)).toBe(true);
  });
});
