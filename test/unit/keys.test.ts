import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { storageKey } from '../../src/stores/keys.js';

/** The hash tag Redis Cluster slots a key by (the first {...} with content). */
function hashTag(key: string): string {
  const open = key.indexOf('{');
  const close = key.indexOf('}', open + 1);
  return key.slice(open + 1, close);
}

describe('storage keys', () => {
  it('never collides for distinct client keys or policies', () => {
    fc.assert(
      fc.property(
        fc.string({ unit: 'binary' }),
        fc.string({ unit: 'binary' }),
        fc.string(),
        (a, b, policy) => {
          fc.pre(a !== b);
          expect(storageKey('tb', policy, a)).not.toBe(storageKey('tb', policy, b));
        },
      ),
    );
    expect(storageKey('tb', 'a:b', 'c')).not.toBe(storageKey('tb', 'a', 'b:c'));
  });

  it('keeps every key of one client in one hash tag, whatever the key contains', () => {
    for (const key of ['{}', '}{', 'héllo 🌍', 'x'.repeat(10_240), '\ud800', '']) {
      const tag = hashTag(storageKey('tb', 'p', key));
      expect(tag.length, JSON.stringify(key.slice(0, 10))).toBeGreaterThan(0);
      expect(tag).toBe(hashTag(storageKey('fw', 'other', key)));
      expect(storageKey('tb', 'p', key).length).toBeLessThan(200);
    }
  });
});
