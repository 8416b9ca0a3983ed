/**
 * The concurrency engine's leases through a Limiter on a MemoryStore: what it shares with the lease
 * core (single-flight, slow start, grants counted, late grants handed back) and what is its own
 * (a local pool of released slots, capped by the cluster's free count).
 */
import { describe, expect, it } from 'vitest';
import { type LeaseEvent, Limiter, MemoryStore } from '../../src/index.js';
import { closedAfterEach } from '../support/closedAfterEach.js';

const open = closedAfterEach();

function setup(options: { limit?: number; maxKeys?: number; store?: MemoryStore } = {}) {
  let t = 1_000_000;
  const now = () => t;
  const leases: LeaseEvent[] = [];
  const limiter = new Limiter({
    store: options.store ?? new MemoryStore({ now }),
    policies: { c: { algorithm: 'concurrency', limit: options.limit ?? 100, slotTtl: '30s' } },
    now,
    sweepIntervalMs: 0,
    maxKeys: options.maxKeys ?? 1000,
    observers: [{ lease: (e) => leases.push(e) }],
  });
  open.push(limiter);
  return { limiter, leases, now, advance: (ms: number) => (t += ms) };
}

/** Background work done: two event-loop turns (an orphaned lease goes back one turn after it lands). */
const settle = async () => {
  for (let i = 0; i < 2; i++) await new Promise((resolve) => setImmediate(resolve));
};

const granted = (leases: LeaseEvent[]) => leases.filter((e) => e.kind === 'granted').map((e) => e.tokens);

describe('concurrency leases', () => {
  it('slow start: each block of free slots doubles the last one, up to a share of the free slots', async () => {
    const { limiter, leases } = setup({ limit: 100 });
    for (let i = 0; i < 40; i++) expect((await limiter.acquire('c', 'k')).allowed, `acquire ${i}`).toBe(true);
    // 1, 2, 4, 8, then capped at 10 % of what is free across the cluster (85 free: 8; 77: 7; ...).
    expect(granted(leases)).toEqual([1, 2, 4, 8, 8, 7, 7, 6]);
    expect(limiter.stats()).toMatchObject({ storeCalls: 8, leasesGranted: 8, tokensLeased: 43 });
  });

  it('single-flight: acquires that miss at once share one store call', async () => {
    const { limiter } = setup();
    const handles = await Promise.all(Array.from({ length: 3 }, () => limiter.acquire('c', 'k')));
    expect(handles.map((h) => h.allowed)).toEqual([true, true, true]);
    // The first call asks for 1 (slow start); the two who shared it ask again, once, for 2.
    expect(limiter.stats().storeCalls).toBe(2);
  });

  it('serves the acquires waiting on slots that land after the key was evicted, then hands the rest back as orphaned', async () => {
    const { limiter, leases } = setup({ maxKeys: 1 });
    await limiter.acquire('c', 'a'); // held: slow start makes the next block 2
    // 'b' evicts 'a' while a's store call is in flight.
    const [a, b] = await Promise.all([limiter.acquire('c', 'a'), limiter.acquire('c', 'b')]);
    expect([a.allowed, b.allowed]).toEqual([true, true]);
    await settle();
    const orphaned = leases.filter((e) => e.kind === 'returned' && e.reason === 'orphaned');
    expect(orphaned, 'what the waiting acquire left of the block, without waiting for a sweep').toEqual([
      expect.objectContaining({ key: 'a', tokens: 1 }),
    ]);
  });

  it('a refused acquire asks the store again: a slot may have been released anywhere since', async () => {
    const store = new MemoryStore({ now: () => 0 });
    const holder = setup({ limit: 1, store });
    const other = setup({ limit: 1, store });
    const held = await holder.limiter.acquire('c', 'k');
    expect((await other.limiter.acquire('c', 'k')).allowed).toBe(false);
    await held.release();
    await holder.limiter.close(); // the released slot went to holder's pool: close hands it back
    expect((await other.limiter.acquire('c', 'k')).allowed, 'refused a moment ago, free now').toBe(true);
    expect(other.limiter.stats().storeCalls).toBe(2);
  });
});
