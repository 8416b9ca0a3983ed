import { describe, expect, it } from 'vitest';
import { parseDuration } from '../../src/duration.js';
import { ConfigError } from '../../src/index.js';

describe('parseDuration', () => {
  it.each([
    [250, 250],
    ['250ms', 250],
    ['1s', 1000],
    ['1.5s', 1500],
    ['1m', 60_000],
    ['1h', 3_600_000],
    ['1d', 86_400_000],
  ])('reads %j as %d ms', (input, ms) => {
    expect(parseDuration(input, 'f')).toBe(ms);
  });

  it.each([0, -1, Number.NaN, Number.POSITIVE_INFINITY, '', '1w', 'soon', '-1s', '0s', null, {}])(
    'rejects %j with a ConfigError naming the field',
    (input) => {
      expect(() => parseDuration(input, 'policies.x.period')).toThrow(ConfigError);
      expect(() => parseDuration(input, 'policies.x.period')).toThrow(/policies\.x\.period/);
    },
  );
});
