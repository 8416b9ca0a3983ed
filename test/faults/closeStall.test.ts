/**
 * Issue 13 item 8: `close()` during a store stall used to give up on each hand-back after one call
 * timeout and strand the leased tokens. It now keeps trying for `closeTimeoutMs`, and never longer.
 */
import { describe, expect, it } from 'vitest';
import { Limiter, RedisStore } from '../../src/index.js';
import { storageKey } from '../../src/stores/keys.js';
import { storedLevel } from '../support/bucketState.js';
import { privateRedis } from '../support/privateRedis.js';

// A server of its own: the pauses would stall every other test file on a shared one.
const { client } = privateRedis();

const KEYS = Array.from({ length: 10 }, (_, i) => `k${i}`);
const USED = 30;
const BURST = 1000;
/**
 * Refill is negligible over the test (1000 an hour), so a bucket's level says what it lost. Leases
 * only: once the fleet is counted (half a second in, later on a loaded machine) allowances would
 * hold no tokens to hand back.
 */
const policy = {
  algorithm: 'token-bucket',
  rate: BURST,
  period: '1h',
  burst: BURST,
  lease: { writeBehind: false },
} as const;

/**
 * A limiter holding leases of every key, USED tokens of each spent. The store's timeout is short,
 * so the pause makes calls time out; a machine loaded enough to time them out before the pause
 * leaves decisions to the fail policy instead of leases: then the setup is tried again.
 */
async function limiterWithLeases(closeTimeoutMs?: number) {
  for (let attempt = 1; ; attempt++) {
    const prefix = `cs:${Math.random().toString(36).slice(2, 8)}:`;
    const store = new RedisStore({ client: client(), timeoutMs: 50, prefix });
    await store.ready();
    const limiter = new Limiter({ store, policies: { p: policy }, closeTimeoutMs });
    for (let i = 0; i < USED; i++) {
      const decisions = await Promise.all(KEYS.map((k) => limiter.consume('p', k)));
      expect(decisions.every((d) => d.allowed)).toBe(true);
    }
    const { storeErrors, fallbackDecisions } = limiter.stats();
    if ((storeErrors === 0 && fallbackDecisions === 0) || attempt === 5) {
      expect(fallbackDecisions, 'every decision from a lease').toBe(0);
      return { store, limiter };
    }
    await limiter.close();
    await store.close();
  }
}

async function levels(store: RedisStore): Promise<number[]> {
  const admin = client();
  return Promise.all(
    KEYS.map(async (k) => {
      return storedLevel(admin, store.redisKey(storageKey('token-bucket', 'p', k)), BURST);
    }),
  );
}

describe('close() while Redis pauses writes', () => {
  it('hands every leased token back once the pause lifts within closeTimeoutMs', async () => {
    const { store, limiter } = await limiterWithLeases();
    const held = limiter.stats().tokensLeased;
    await client().client('PAUSE', 400, 'WRITE');
    await limiter.close();
    const stats = limiter.stats();
    await store.close();
    const after = await levels(store);
    console.log(
      `close() during a 400 ms write pause: ${held} tokens leased, ${stats.tokensStranded} stranded; ` +
        `bucket levels ${after.map((l) => l.toFixed(1)).join(', ')} (exact: ${BURST - USED})`,
    );
    expect(stats.tokensStranded, 'nothing stranded').toBe(0);
    for (const [i, level] of after.entries()) {
      // The refill over the test is below a token.
      expect(level, `bucket ${KEYS[i]} got back everything not used`).toBeGreaterThanOrEqual(
        BURST - USED - 0.01,
      );
      expect(level, `bucket ${KEYS[i]} not credited twice`).toBeLessThanOrEqual(BURST - USED + 1);
    }
  });

  it('returns before a pause longer than closeTimeoutMs ends, counting what it could not hand back', async () => {
    const { store, limiter } = await limiterWithLeases(200);
    await client().client('PAUSE', 1500, 'WRITE');
    // A write of another client: Redis answers it only when the pause lifts.
    const pauseOver = client()
      .set(`${store.prefix}pause-probe`, '1', 'PX', 60_000)
      .then(() => 'pause over' as const);
    const first = await Promise.race([limiter.close().then(() => 'closed' as const), pauseOver]);
    expect(first, 'close() does not wait for the pause').toBe('closed');
    expect(limiter.stats().tokensStranded, 'what was not handed back is counted').toBeGreaterThan(0);
    await pauseOver;
    await store.close();
  });
});
