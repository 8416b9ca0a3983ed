import { describe, expect, it } from 'vitest';
import { Limiter, MemoryStore, type Operation, type Store, type TokenBucketPolicy } from '../../src/index.js';
import { closedAfterEach } from '../support/closedAfterEach.js';

/**
 * Lease sizes while a token bucket is oversubscribed (docs/accuracy.md "Where the worst drift comes
 * from"): each token an instance leases waits there for its next requests while peers are refused,
 * so the fleet lags the exact bucket by about rate × horizon / 2. Oversubscribed (below half the
 * burst after the instance's last grant), leases cover a shorter horizon and an instance holds one
 * at a time, two if its demand covers them (a quiet one holds none:
 * test/unit/quietInstancesExact.test.ts); far from empty they
 * keep the configured horizon (80 % of it in a fleet known to have more than one instance).
 */
const POLICY: TokenBucketPolicy = { algorithm: 'token-bucket', rate: 100, period: '1s', burst: 100 };

const open = closedAfterEach();

/**
 * A store that records the lease sizes its caller asks for, and (`onLease`) the tokens granted,
 * so that a test can tell how many its caller held when it asked.
 */
function recording(inner: Store, wants: number[], onLease?: (want: number, granted: number) => void): Store {
  return {
    async run<S, Req, Res>(op: Operation<S, Req, Res>, key: string, req: Req): Promise<Res> {
      const want = (req as { want?: number }).want;
      if (want !== undefined && want > 0) wants.push(want);
      const result = await inner.run(op, key, req);
      if (want !== undefined && want > 0) onLease?.(want, (result as { granted: number }).granted);
      return result;
    },
    close: () => inner.close(),
  };
}

/** A tested instance whose store calls are recorded, and a peer, on one shared store. */
function pair(
  policy: TokenBucketPolicy,
  now: () => number,
  onLease?: (want: number, granted: number) => void,
) {
  const shared = new MemoryStore({ now });
  const wants: number[] = [];
  const tested = new Limiter({
    store: recording(shared, wants, onLease),
    policies: { p: policy },
    now,
    sweepIntervalMs: 0,
  });
  const peer = new Limiter({ store: shared, policies: { p: policy }, now, sweepIntervalMs: 0 });
  open.push(tested, peer);
  return { tested, peer, wants };
}

/** `tested` sees a request every 50 ms (20/s) for 2 s; `peer` (if any) one every 5 ms (200/s). */
async function run(withPeer: boolean): Promise<number[]> {
  let t = 1_000_000;
  const { tested, peer, wants } = pair(POLICY, () => t);
  for (let ms = 0; ms < 2000; ms += 5) {
    t = 1_000_000 + ms;
    if (withPeer) await peer.consume('p', 'k');
    if (ms % 50 === 0) await tested.consume('p', 'k');
  }
  return wants;
}

describe('token-bucket lease sizes', () => {
  it('cover the 500 ms horizon of demand while the bucket is far from empty', async () => {
    const wants = await run(false);
    // About 19/s by the decaying estimate (src/demand.ts), after slow start.
    expect(Math.max(...wants), '20/s over 500 ms').toBeGreaterThanOrEqual(9);
  });

  it('cover 150 ms of demand while peers keep the bucket below zero', async () => {
    const wants = await run(true);
    // The first leases are slow start while the peer drains the burst.
    const late = wants.slice(-3);
    expect(late.length, 'the tested instance kept leasing').toBe(3);
    expect(Math.max(...late), '20/s over 150 ms').toBeLessThanOrEqual(3);
  });

  it('cover 150 ms of demand below half the burst, though nowhere near zero', async () => {
    // No refill to speak of: after a peer took 50 tokens, the level only falls, from 50 less what
    // the peer holds.
    const slow: TokenBucketPolicy = { algorithm: 'token-bucket', rate: 1, period: '1h', burst: 100 };
    let ms = 0;
    const { tested, peer, wants } = pair(slow, () => 1_000_000 + ms);
    let taken = 0;
    while (taken < 50) if ((await peer.consume('p', 'k')).allowed) taken++;
    // 20/s for 1.5 s: 30 tokens, the level stays above zero.
    for (; ms < 1500; ms += 50) expect((await tested.consume('p', 'k')).allowed).toBe(true);
    expect(Math.max(...wants.slice(-3)), '20/s over 150 ms').toBeLessThanOrEqual(3);
  });

  /**
   * What the tested instance held each time it asked for a lease, the last ten times, with a peer
   * at 200/s keeping the bucket below zero and the tested instance seeing a request every
   * `everyMs`.
   */
  async function heldWhenAsking(everyMs: number): Promise<number[]> {
    let t = 1_000_000;
    let granted = 0;
    let admitted = 0;
    const held: number[] = [];
    const { tested, peer } = pair(
      POLICY,
      () => t,
      (_want, got) => {
        held.push(granted - admitted);
        granted += got;
      },
    );
    for (let ms = 0; ms < 2000; ms += 5) {
      t = 1_000_000 + ms;
      await peer.consume('p', 'k');
      if (ms % everyMs === 0 && (await tested.consume('p', 'k')).allowed) admitted++;
    }
    const late = held.slice(-10);
    expect(late.length, 'the tested instance kept leasing').toBe(10);
    return late;
  }

  it('are one at a time while the bucket is oversubscribed', async () => {
    // 50/s: 7.5 tokens over the saturated horizon, less than a whole lease (10) more than it holds.
    const late = await heldWhenAsking(20);
    // Refilled ahead only once everything held was spent (sizes are whole tokens here).
    expect(Math.max(...late), 'held when it asked').toBeLessThan(1);
  });

  it('are two at most at an instance whose demand covers a second one', async () => {
    // 200/s, as fast as the peer: 30 tokens over the saturated horizon. Asking only once its lease
    // was spent, it waited behind the peer's lease every time, refusing its own requests meanwhile.
    const late = await heldWhenAsking(5);
    expect(Math.max(...late), 'asked for the next lease while still holding one').toBeGreaterThanOrEqual(1);
    // The docs' bound on what an instance holds: two leases of at most `maxFraction · burst` (10).
    expect(Math.max(...late), 'held at most one lease when it asked').toBeLessThanOrEqual(10);
  });
});
