import { describe, expect, it } from 'vitest';
import { Limiter, MemoryStore, type Operation, type Store, type TokenBucketPolicy } from '../../src/index.js';
import { closedAfterEach } from '../support/closedAfterEach.js';

/**
 * Tokens stranded in leases of an oversubscribed bucket (docs/accuracy.md "Where the worst drift
 * comes from"): each token an instance holds unspent while peers are refused is a request the
 * exact bucket would have admitted. Twenty instances behind round-robin at twice the limit see a
 * request every 100 ms each: a lease of two strands its second token for most of that, about ten
 * tokens over the fleet. Such a quiet instance now asks the store for exactly the cost at hand while
 * the bucket is oversubscribed, and holds nothing it has not spent.
 */
const POLICY: TokenBucketPolicy = { algorithm: 'token-bucket', rate: 100, period: '1s', burst: 100 };
const INSTANCES = 20;
/** One request every 5 ms (200/s: twice the limit), round-robin: each instance sees 10/s. */
const EVERY_MS = 5;
const RUN_MS = 3000;
const START = 1_000_000;

const open = closedAfterEach();

/** What one instance took from the store and gave back, in tokens. */
interface Ledger {
  granted: number;
  returned: number;
}

/** A store that keeps `ledger` of the tokens its caller was granted and handed back. */
function ledgered(inner: Store, ledger: Ledger): Store {
  return {
    async run<S, Req, Res>(op: Operation<S, Req, Res>, key: string, req: Req): Promise<Res> {
      const result = await inner.run(op, key, req);
      const r = req as { returned?: number; tokens?: number };
      ledger.returned += op.script.endsWith('_release') ? (r.tokens ?? 0) : (r.returned ?? 0);
      ledger.granted += (result as { granted?: number } | null)?.granted ?? 0;
      return result;
    },
    close: () => inner.close(),
  };
}

interface Sample {
  atMs: number;
  /** Tokens the fleet was granted and neither spent nor handed back. */
  held: number;
  /** What the exact bucket admitted less what the fleet admitted, so far. */
  shortfall: number;
}

/** Runs the round-robin fleet next to an exact bucket; samples every 250 ms after the first second. */
async function run(): Promise<Sample[]> {
  let t = START;
  const now = () => t;
  const shared = new MemoryStore({ now });
  const ledgers: Ledger[] = [];
  const fleet: Limiter[] = [];
  for (let i = 0; i < INSTANCES; i++) {
    const ledger = { granted: 0, returned: 0 };
    ledgers.push(ledger);
    fleet.push(
      new Limiter({ store: ledgered(shared, ledger), policies: { p: POLICY }, now, sweepIntervalMs: 0 }),
    );
  }
  const exact = new Limiter({
    store: new MemoryStore({ now }),
    policies: { p: { ...POLICY, lease: 'exact' } },
    now,
    sweepIntervalMs: 0,
  });
  open.push(...fleet, exact);
  let admitted = 0;
  let exactAdmitted = 0;
  const samples: Sample[] = [];
  for (let ms = 0, n = 0; ms < RUN_MS; ms += EVERY_MS, n++) {
    t = START + ms;
    if ((await fleet[n % INSTANCES]!.consume('p', 'k')).allowed) admitted++;
    if ((await exact.consume('p', 'k')).allowed) exactAdmitted++;
    if (ms >= 1000 && ms % 250 === 0) {
      let held = -admitted;
      for (const l of ledgers) held += l.granted - l.returned;
      samples.push({ atMs: ms, held, shortfall: exactAdmitted - admitted });
    }
  }
  return samples;
}

describe('an oversubscribed bucket behind quiet instances', () => {
  it('leaves no token in a lease unspent', async () => {
    const samples = await run();
    expect(samples.length, 'sampled').toBeGreaterThan(0);
    for (const s of samples) expect(s.held, `held at ${s.atMs} ms`).toBeLessThanOrEqual(0);
  });

  it('admits what the exact bucket admits, within a token or two at every moment', async () => {
    const samples = await run();
    for (const s of samples) {
      expect(Math.abs(s.shortfall), `short of the exact bucket at ${s.atMs} ms`).toBeLessThanOrEqual(2);
    }
  });
});
