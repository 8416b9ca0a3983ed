import { describe, expect, it } from 'vitest';
import { ClientIp, ipKey, normalize, parseHop } from '../../src/http/clientIp.js';

// Each class of IPv6 spelling, written several ways; every row is one address.
const SPELLINGS: [string, string[]][] = [
  [
    'leading zeros and upper case',
    ['2001:0DB8:0000:0000:0000:0000:0000:0001', '2001:db8::1', '2001:DB8::0001'],
  ],
  [
    'where the zero run is compressed',
    ['1:0:0:1:0:0:0:1', '1:0:0:1::1', '1::1:0:0:0:1', '0001:0:0:1:0:0:0:0001'],
  ],
  ['an embedded dotted quad', ['2001:db8::1.2.3.4', '2001:db8::102:304', '2001:db8:0:0:0:0:102:304']],
  ['a zone index', ['fe80::1%eth0', 'fe80::1', 'FE80:0:0:0:0:0:0:1%1']],
  ['loopback', ['::1', '0:0:0:0:0:0:0:1', '0000:0000:0000:0000:0000:0000:0000:0001']],
];

// IPv4 clients that reach a dual-stack socket or a proxy as IPv6.
const IPV4_FORMS = [
  '1.2.3.4',
  '::ffff:1.2.3.4',
  '::ffff:102:304',
  '::FFFF:0102:0304',
  '0:0:0:0:0:ffff:1.2.3.4',
  '::1.2.3.4',
];

describe('IPv6 spellings share one bucket', () => {
  it.each(SPELLINGS)('%s', (_class, forms) => {
    for (const subnet of [false, 128, 64, 56] as const) {
      const ip = new ClientIp({ ipv6Subnet: subnet });
      const keys = new Set(forms.map((f) => ip.group(ip.address(f, undefined)!)));
      expect([...keys], `ipv6Subnet ${subnet}: ${forms.join(' | ')}`).toHaveLength(1);
    }
  });

  it('distinct addresses stay apart with ipv6Subnet false and 128', () => {
    for (const subnet of [false, 128] as const) {
      const ip = new ClientIp({ ipv6Subnet: subnet });
      expect(ip.group(normalize('2001:db8::1')!)).not.toBe(ip.group(normalize('2001:db8::2')!));
    }
  });

  it('IPv4-mapped IPv6, in dotted or hex form, is the IPv4 client', () => {
    for (const form of IPV4_FORMS) expect(normalize(form), form).toBe('1.2.3.4');
    expect(normalize('::ffff:7f00:1'), 'hex-mapped loopback is not ::1').toBe('127.0.0.1');
    expect(new ClientIp().group(normalize('::ffff:102:304')!)).not.toBe(
      new ClientIp().group(normalize('::1')!),
    );
  });

  it('an address that only ends in a dotted quad is IPv6, grouped by its prefix', () => {
    expect(normalize('2001:db8::1.2.3.4')).toBe('2001:db8::102:304');
    expect(normalize('64:ff9b::1.2.3.4')).toBe('64:ff9b::102:304');
    expect(ipKey(normalize('64:ff9b::1.2.3.4')!, 56)).toBe('64:ff9b::/56');
    expect(ipKey(normalize('::1')!, 56), '::1 is not an IPv4-compatible address').toBe('::/56');
  });
});

describe('proxies that append a port', () => {
  it.each([
    ['203.0.113.7:4711', '203.0.113.7'],
    ['[2001:db8::7]:4711', '2001:db8::7'],
    ['[2001:db8::7]', '2001:db8::7'],
    ['[::ffff:203.0.113.7]:80', '203.0.113.7'],
    ['2001:db8::7', '2001:db8::7'],
    ['203.0.113.7:', undefined],
    ['203.0.113.7:x', undefined],
    ['[2001:db8::7]:', undefined],
    ['[not-an-ip]:80', undefined],
  ])('%s -> %s', (hop, expected) => {
    expect(parseHop(hop)).toBe(expected);
  });

  it('each client behind an Azure-style proxy is counted by its own address', () => {
    const ip = new ClientIp({ trustProxy: ['10.0.0.0/8'] });
    expect(ip.address('10.0.0.5', '198.51.100.1:50123')).toBe('198.51.100.1');
    expect(ip.address('10.0.0.5', '198.51.100.2:50124')).toBe('198.51.100.2');
    expect(ip.address('10.0.0.5', '[2001:db8::9]:443, 10.0.0.6:8080')).toBe('2001:db8::9');
  });

  it('a port on an untrusted hop changes nothing', () => {
    const ip = new ClientIp({ trustProxy: 1 });
    expect(ip.address('10.0.0.5', 'spoofed:1, 198.51.100.1:50123')).toBe('198.51.100.1');
    expect(new ClientIp().address('10.0.0.5', '198.51.100.1:50123')).toBe('10.0.0.5');
  });
});
