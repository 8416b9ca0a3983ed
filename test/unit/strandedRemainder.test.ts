import { describe, expect, it } from 'vitest';
import {
  Limiter,
  MemoryStore,
  type Operation,
  type Store,
  StoreUnavailableError,
  type TokenBucketPolicy,
} from '../../src/index.js';
import { closedAfterEach } from '../support/closedAfterEach.js';

/**
 * What an instance holds when a request costs more than that (docs/accuracy.md "Where the worst
 * drift comes from"): kept, the remainder waits for a smaller request at this instance while peers
 * are refused. It goes back in the call that asks for the whole cost.
 */
// Refills one token an hour: no token appears while the test runs.
const POLICY: TokenBucketPolicy = { algorithm: 'token-bucket', rate: 1, period: '1h', burst: 100 };

const open = closedAfterEach();

interface Call {
  req: { want?: number; min?: number; returned?: number };
  result: unknown;
}

/** A store that records every call its caller makes, with the answer; `down` fails calls unsent. */
function recording(inner: Store, calls: Call[], down = { now: false }): Store {
  return {
    async run<S, Req, Res>(op: Operation<S, Req, Res>, key: string, req: Req): Promise<Res> {
      if (down.now) throw new StoreUnavailableError('down for the test');
      const result = await inner.run(op, key, req);
      calls.push({ req: req as Call['req'], result });
      return result;
    },
    close: () => inner.close(),
  };
}

function granted(calls: readonly Call[]): number {
  let sum = 0;
  for (const c of calls) sum += (c.result as { granted?: number } | null)?.granted ?? 0;
  return sum;
}

/** `tested`'s next `n` requests are admitted from what it holds, without a store call. */
async function expectServedFromLease(tested: Limiter, n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    const d = await tested.consume('p', 'k');
    expect(d.allowed).toBe(true);
    expect(d.source, 'from what it holds').toBe('lease');
  }
}

describe('a remainder smaller than the cost at hand', () => {
  /**
   * A tested instance holding a few tokens of a bucket a peer then empties (refilling one token an
   * hour), having taken `first` before the tested instance leased. `other` is a peer not refused
   * yet, so it asks the store rather than remember a refusal.
   */
  async function emptied(down = { now: false }, first = 0) {
    const clock = { t: 1_000_000 };
    const now = () => clock.t;
    const shared = new MemoryStore({ now });
    const calls: Call[] = [];
    const tested = new Limiter({
      store: recording(shared, calls, down),
      policies: { p: POLICY },
      now,
      sweepIntervalMs: 0,
    });
    const peer = () => new Limiter({ store: shared, policies: { p: POLICY }, now, sweepIntervalMs: 0 });
    const drainer = peer();
    const other = peer();
    open.push(tested, drainer, other);
    let drained = 0;
    while (drained < first) if ((await drainer.consume('p', 'k')).allowed) drained++;
    // The tested instance leases (slow start) until it holds a few tokens beyond what it spent.
    let admitted = 0;
    while (granted(calls) - admitted < 2 || granted(calls) < 6) {
      expect((await tested.consume('p', 'k')).allowed).toBe(true);
      admitted++;
    }
    const held = granted(calls) - admitted;
    expect(held, 'held by the tested instance').toBeLessThan(5);
    while ((await drainer.consume('p', 'k')).allowed) drained++;
    expect(admitted + held + drained).toBe(100);
    return { clock, calls, tested, other, held };
  }

  it('goes back in the call that asks for the whole cost, and serves a peer', async () => {
    const { clock, calls, tested, other, held } = await emptied();
    const before = calls.length;
    const d = await tested.consume('p', 'k', 5);
    expect(d.allowed, 'five tokens exist nowhere').toBe(false);
    const made = calls.slice(before);
    expect(made, 'one call').toHaveLength(1);
    expect(made[0]!.req.returned, 'the remainder rides on it').toBe(held);
    expect(made[0]!.req.min, 'asking for the whole cost').toBe(5);

    // Back in the bucket, the remainder admits a peer's requests (10 s later: the drainer's lease
    // reached a fraction of a token ahead, which now exists).
    clock.t += 10_000;
    for (let i = 0; i < held; i++) expect((await other.consume('p', 'k')).allowed).toBe(true);
    expect((await other.consume('p', 'k')).allowed).toBe(false);
  });

  it('is held again when that call was never sent', async () => {
    const down = { now: false };
    const { tested, held } = await emptied(down);
    down.now = true;
    // Decided by the fail policy (open by default): what matters here is the remainder.
    await tested.consume('p', 'k', 5);
    down.now = false;
    await expectServedFromLease(tested, held);
  });

  it('is kept for a cost above any lease that the store could not cover with it', async () => {
    // The tested instance's last grant left the bucket below 20 tokens, so it knows. It takes 15
    // requests at once before it leases (a quieter instance decides each request exactly while the
    // bucket is oversubscribed, holding nothing): 70 drained leave it room for them.
    const { calls, tested, held } = await emptied(undefined, 70);
    const before = calls.length;
    expect((await tested.consume('p', 'k', 20)).allowed, 'decided by the store, exactly').toBe(false);
    expect(
      calls.slice(before).map((c) => c.req.returned ?? 0),
      'nothing handed back',
    ).toEqual([0]);
    await expectServedFromLease(tested, held);
  });
});
