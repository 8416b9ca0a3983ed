import { describe, expect, it } from 'vitest';
import { Limiter, MemoryStore, type Operation, type Store, type TokenBucketPolicy } from '../../src/index.js';
import { closedAfterEach } from '../support/closedAfterEach.js';

/**
 * Lease sizes while a token bucket is oversubscribed (docs/accuracy.md "Where the worst drift comes
 * from"): each token an instance leases waits there for its next requests while peers are refused,
 * so the fleet lags the exact bucket by about rate × horizon / 2. Oversubscribed, leases cover a
 * shorter horizon; far from empty they keep the configured one.
 */
const POLICY: TokenBucketPolicy = { algorithm: 'token-bucket', rate: 100, period: '1s', burst: 100 };

const open = closedAfterEach();

/** A store that records the lease sizes its caller asks for. */
function recording(inner: Store, wants: number[]): Store {
  return {
    run<S, Req, Res>(op: Operation<S, Req, Res>, key: string, req: Req): Promise<Res> {
      const want = (req as { want?: number }).want;
      if (want !== undefined && want > 0) wants.push(want);
      return inner.run(op, key, req);
    },
    close: () => inner.close(),
  };
}

/** `tested` sees a request every 50 ms (20/s) for 2 s; `peer` (if any) one every 5 ms (200/s). */
async function run(withPeer: boolean): Promise<number[]> {
  let t = 1_000_000;
  const now = () => t;
  const shared = new MemoryStore({ now });
  const wants: number[] = [];
  const tested = new Limiter({
    store: recording(shared, wants),
    policies: { p: POLICY },
    now,
    sweepIntervalMs: 0,
  });
  const peer = new Limiter({ store: shared, policies: { p: POLICY }, now, sweepIntervalMs: 0 });
  open.push(tested, peer);
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

  it('cover 200 ms of demand while peers keep the bucket below zero', async () => {
    const wants = await run(true);
    // The first leases are slow start while the peer drains the burst.
    const late = wants.slice(-3);
    expect(late.length, 'the tested instance kept leasing').toBe(3);
    expect(Math.max(...late), '20/s over 200 ms').toBeLessThanOrEqual(4);
  });
});
