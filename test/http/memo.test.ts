import { describe, expect, it } from 'vitest';
import { memoize } from '../../src/http/memo.js';

describe('memoize (the bounded memo of parsed addresses and paths)', () => {
  it('computes each key once, undefined answers included', () => {
    const calls: string[] = [];
    const parse = memoize(
      (k: string) => {
        calls.push(k);
        return k === 'bad' ? undefined : k.length;
      },
      { size: 10, maxKeyLength: 8 },
    );
    expect([parse('a'), parse('bb'), parse('a'), parse('bad'), parse('bad')]).toEqual([
      1,
      2,
      1,
      undefined,
      undefined,
    ]);
    expect(calls, 'each key computed once').toEqual(['a', 'bb', 'bad']);
  });

  it('forgets everything once full, and never keeps a key longer than maxKeyLength', () => {
    const calls: string[] = [];
    const parse = memoize(
      (k: string) => {
        calls.push(k);
        return k;
      },
      { size: 2, maxKeyLength: 3 },
    );
    parse('a');
    parse('b');
    parse('c'); // full: forgets a and b, keeps c
    parse('c');
    parse('a');
    parse('long');
    parse('long');
    expect(calls).toEqual(['a', 'b', 'c', 'a', 'long', 'long']);
  });
});
