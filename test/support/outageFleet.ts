import type { Redis } from 'ioredis';
import { Limiter, type LimiterOptions, RedisStore } from '../../src/index.js';

export interface FleetInstance {
  store: RedisStore;
  limiter: Limiter;
}

/**
 * `count` gateway instances, each a limiter on a RedisStore of its own client, as a fleet sharing
 * one redis-server is deployed. The short store timeout lets an outage the test causes fail fast.
 */
export async function outageFleet(
  client: () => Redis,
  count: number,
  options: Omit<LimiterOptions, 'store'>,
): Promise<FleetInstance[]> {
  return Promise.all(
    Array.from({ length: count }, async () => {
      const store = new RedisStore({ client: client(), timeoutMs: 50 });
      await store.ready();
      return { store, limiter: new Limiter({ ...options, store }) };
    }),
  );
}

/** Closes every limiter, handing back what it holds, before the stores under them. */
export async function closeFleet(instances: FleetInstance[]): Promise<void> {
  await Promise.all(instances.map(({ limiter }) => limiter.close()));
  await Promise.all(instances.map(({ store }) => store.close()));
}
