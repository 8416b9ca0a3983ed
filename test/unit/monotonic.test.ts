import { afterEach, describe, expect, it, vi } from 'vitest';
import { Limiter, MemoryStore } from '../../src/index.js';

afterEach(() => {
  vi.restoreAllMocks();
});

describe('intervals use a monotonic clock', () => {
  it('a wall clock stepped back 10 s does not stretch a remembered denial', async () => {
    let step = 0;
    const realNow = Date.now.bind(Date);
    // The wall clock as the process sees it, stepped back on demand (an NTP correction).
    vi.spyOn(Date, 'now').mockImplementation(() => realNow() - step);
    // The store on its own clock, so only the limiter could see the step.
    const store = new MemoryStore({ now: () => performance.timeOrigin + performance.now() });
    // Exact mode: a refusal is remembered locally until the bucket has room (250 ms here: long
    // enough that a loaded machine still asks twice within it).
    const limiter = new Limiter({
      store,
      policies: { p: { algorithm: 'token-bucket', rate: 4, burst: 1, lease: 'exact' } },
    });
    expect((await limiter.consume('p', 'k')).allowed).toBe(true);
    const denied = await limiter.consume('p', 'k');
    expect(denied.allowed).toBe(false);
    step = 10_000;
    await new Promise((resolve) => setTimeout(resolve, denied.retryAfterMs + 30));
    expect((await limiter.consume('p', 'k')).allowed, 'allowed once the retry time has passed').toBe(true);
    await limiter.close();
  });
});
