import { describe, expect, it } from 'vitest';
import { CircuitBreaker } from '../../src/breaker.js';
import { ConfigError } from '../../src/index.js';

function clock() {
  let t = 0;
  return { now: () => t, advance: (ms: number) => (t += ms) };
}

describe('circuit breaker', () => {
  it('opens after `failures` consecutive failures and rejects until the cool-down ends', () => {
    const c = clock();
    const b = new CircuitBreaker({ failures: 3, coolDown: '250ms' }, c.now);
    b.failure();
    b.failure();
    b.success();
    b.failure();
    b.failure();
    expect(b.state, 'a success resets the count').toBe('closed');
    b.failure();
    expect(b.state).toBe('open');
    expect(b.tryPass()).toBe(false);
    expect(b.msUntilProbe()).toBe(250);
    c.advance(249);
    expect(b.tryPass()).toBe(false);
  });

  it('lets exactly one probe through after the cool-down; its outcome closes or reopens', () => {
    const c = clock();
    const b = new CircuitBreaker({ failures: 1, coolDown: 100 }, c.now);
    b.failure();
    c.advance(100);
    expect(b.tryPass(), 'the probe').toBe(true);
    expect(b.state).toBe('half-open');
    expect(b.tryPass(), 'no second call while the probe runs').toBe(false);
    b.failure();
    expect(b.state).toBe('open');
    expect(b.msUntilProbe(), 'a failed probe starts a new cool-down').toBe(100);
    c.advance(100);
    expect(b.tryPass()).toBe(true);
    b.success();
    expect(b.state).toBe('closed');
    expect(b.tryPass()).toBe(true);
  });

  it.each([
    [{ failures: 0 }, 'breaker.failures'],
    [{ failures: 1.5 }, 'breaker.failures'],
    [{ coolDown: 'soon' }, 'breaker.coolDown'],
    [{ coolDown: -1 }, 'breaker.coolDown'],
  ])('rejects %j naming %s', (options, field) => {
    const err = (() => {
      try {
        new CircuitBreaker(options as never, Date.now);
      } catch (e) {
        return e;
      }
    })();
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).field).toBe(field);
  });
});
