import { describe, expect, it } from 'vitest';
import { Limiter, MemoryStore } from '../../src/index.js';
import { FaultyStore } from '../support/faultyStore.js';
import { countFleet, settle } from '../support/virtualFleet.js';

describe('first sight', () => {
  it('admits one request per instance and key before the store answers, however long it is down', async () => {
    let t = 1_000_000;
    const now = () => t;
    const shared = new MemoryStore({ now });
    const policies = {
      p: {
        algorithm: 'token-bucket' as const,
        rate: 100,
        period: '1s' as const,
        burst: 100,
        fail: 'closed' as const,
      },
    };
    const store = new FaultyStore(shared);
    const a = new Limiter({ store, policies, now, sweepIntervalMs: 0 });
    const b = new Limiter({ store: new FaultyStore(shared), policies, now, sweepIntervalMs: 0 });
    await countFleet([a, b], (ms) => {
      t += ms;
    });
    store.fault = 'down';
    let admitted = 0;
    // 4 s of requests for a key A never saw, the breaker opening and probing again meanwhile.
    for (let i = 0; i < 80; i++) {
      if ((await a.consume('p', 'new')).allowed) admitted++;
      await settle();
      a.sweep();
      t += 50;
    }
    expect(admitted, 'only the first sight').toBe(1);
    store.fault = 'none';
    await a.close();
    await b.close();
  });
});

describe('the decision of a first sight', () => {
  it('counts the request it admits', async () => {
    let t = 1_000_000;
    const now = () => t;
    const store = new MemoryStore({ now });
    const policies = { p: { algorithm: 'token-bucket' as const, rate: 100, period: '1s' as const } };
    const a = new Limiter({ store, policies, now, sweepIntervalMs: 0 });
    await countFleet([a], (ms) => {
      t += ms;
    });
    const d = await a.consume('p', 'fresh');
    expect(d, 'one of 100 taken, refilled in 10 ms').toMatchObject({
      allowed: true,
      remaining: 99,
      resetMs: 10,
    });
    await a.close();
  });
});
