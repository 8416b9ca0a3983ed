import { hash32, type Random, WeightedPicker } from './random.js';
import type { BalancerConfig } from './scenario.js';

/**
 * Picks the instance that serves a request, among the live ones (by id, in order of joining).
 * `members` is called whenever the live set changes, so balancers can precompute their tables.
 */
export interface Balancer {
  members(ids: readonly number[]): void;
  pick(key: string): number;
}

export function createBalancer(config: BalancerConfig, random: Random): Balancer {
  switch (config.kind) {
    case 'round-robin':
      return new RoundRobin();
    case 'random':
      return new Weighted(random, () => 1);
    case 'zipf':
      return new Weighted(random, (rank) => 1 / (rank + 1) ** config.s);
    case 'weighted':
      return new Weighted(random, (_rank, id) => config.weights[id % config.weights.length]!);
    case 'sticky':
      return new Sticky();
  }
}

class RoundRobin implements Balancer {
  #ids: readonly number[] = [];
  #next = 0;

  members(ids: readonly number[]): void {
    this.#ids = ids;
  }

  pick(): number {
    this.#next = (this.#next + 1) % this.#ids.length;
    return this.#ids[this.#next]!;
  }
}

/** Weight by rank among the live instances (Zipf, uniform) or by instance id (explicit weights). */
class Weighted implements Balancer {
  #ids: readonly number[] = [];
  #picker = new WeightedPicker([]);

  constructor(
    private readonly random: Random,
    private readonly weight: (rank: number, id: number) => number,
  ) {}

  members(ids: readonly number[]): void {
    this.#ids = ids;
    this.#picker = new WeightedPicker(ids.map((id, rank) => this.weight(rank, id)));
  }

  pick(): number {
    return this.#ids[this.#picker.pick(this.random)]!;
  }
}

/** Points per instance on the ring: enough that keys spread evenly over a few instances. */
const VIRTUAL_NODES = 64;

/** Consistent hashing: a key stays on its instance, and only the keys of a joining or leaving one move. */
class Sticky implements Balancer {
  #points = new Uint32Array(0);
  #owners: number[] = [];
  readonly #cache = new Map<string, number>();

  members(ids: readonly number[]): void {
    const ring = ids
      .flatMap((id) =>
        Array.from({ length: VIRTUAL_NODES }, (_, v) => [hash32(`instance-${id}#${v}`), id] as const),
      )
      .sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    this.#points = Uint32Array.from(ring, (p) => p[0]);
    this.#owners = ring.map((p) => p[1]);
    this.#cache.clear();
  }

  pick(key: string): number {
    let owner = this.#cache.get(key);
    if (owner === undefined) {
      const h = hash32(key);
      const points = this.#points;
      let lo = 0;
      let hi = points.length;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (points[mid]! < h) lo = mid + 1;
        else hi = mid;
      }
      owner = this.#owners[lo === points.length ? 0 : lo]!;
      this.#cache.set(key, owner);
    }
    return owner;
  }
}
