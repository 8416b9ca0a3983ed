import { describe, expect, it } from 'vitest';
import { StoreUnavailableError } from '../../src/errors.js';
import { Limiter, MemoryStore } from '../../src/index.js';
import type { Operation, Store } from '../../src/stores/store.js';
import { countFleet, settle } from '../support/virtualFleet.js';

/** A connection whose calls, while `slow`, run on the store only when `deliver()` is called. */
class SlowStore implements Store {
  slow = false;
  down = false;
  #held: (() => void)[] = [];
  constructor(private readonly inner: MemoryStore) {}
  run<S, Req, Res>(op: Operation<S, Req, Res>, key: string, req: Req): Promise<Res> {
    if (this.down) return Promise.reject(new StoreUnavailableError('down'));
    if (!this.slow) return this.inner.run(op, key, req);
    return new Promise((resolve, reject) => {
      this.#held.push(() => this.inner.run(op, key, req).then(resolve, reject));
    });
  }
  get pending(): number {
    return this.#held.length;
  }
  deliver(): void {
    const held = this.#held;
    this.#held = [];
    for (const run of held) run();
  }
  close(): Promise<void> {
    return Promise.resolve();
  }
}

describe('a report of the window that turned', () => {
  it('goes with the next report when it was never sent', async () => {
    const WINDOW = 1000;
    let t = 1_000 * WINDOW;
    const now = () => t;
    const shared = new MemoryStore({ now });
    const policy = { algorithm: 'sliding-window' as const, limit: 200, window: '1s' as const };
    const slow = new SlowStore(shared);
    // A breaker that stays closed: the calls after the outage must go out at once.
    const a = new Limiter({
      store: slow,
      policies: { p: policy },
      now,
      sweepIntervalMs: 0,
      breaker: { failures: 100 },
    });
    const b = new Limiter({
      store: shared,
      policies: { p: { ...policy, lease: { writeBehind: false } } },
      now,
      sweepIntervalMs: 0,
    });
    await countFleet([a, b], (ms) => {
      t += ms;
    });
    // Window W: B takes 110, below half of the limit left, so A leases.
    t = Math.ceil(t / WINDOW) * WINDOW;
    for (let i = 0; i < 110; i++) await b.consume('p', 'k');
    await b.close();
    for (let i = 0; i < 3; i++) expect((await a.consume('p', 'k')).allowed).toBe(true);
    // A's next sync leaves just before W ends and is answered late in W + 1, with an allowance
    // (the previous window weighs little by then), while A still holds its slice of W.
    slow.slow = true;
    t += WINDOW - 10;
    const waiting: Promise<unknown>[] = [];
    for (let i = 0; i < 20 && slow.pending === 0; i++) {
      waiting.push(a.consume('p', 'k'));
      await settle();
    }
    expect(slow.pending, 'a sync in flight').toBe(1);
    t += 410;
    slow.slow = false;
    slow.deliver();
    await Promise.all(waiting);
    await settle();
    let admitted = 0;
    for (let i = 0; i < 3; i++) if ((await a.consume('p', 'k')).allowed) admitted++;
    // The slice of W is over: its hand-back and the report of W + 1's usage are never sent.
    slow.down = true;
    a.sweep();
    await settle();
    slow.down = false;
    await a.close();
    const probe = new Limiter({ store: shared, policies: { p: { ...policy, lease: 'exact' } }, now });
    // 400 ms into W + 1 the 113 of W weigh 0.6; A's 1 + 3 of W + 1 count in full.
    expect(admitted).toBe(3);
    expect((await probe.peek('p', 'k')).remaining, 'every admission counted once').toBe(
      Math.floor(200 - 113 * 0.6 - 4),
    );
    await probe.close();
  });
});
