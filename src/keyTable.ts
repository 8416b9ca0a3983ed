/**
 * The limiter's local key table: the `KeyState` of each (policy, client key) it tracks, at most
 * `maxKeys` of them, the least recently used evicted (its leased tokens handed back by `dispose`).
 *
 * A lookup is on the path of every decision, so it avoids what an LRU lookup costs where it can:
 * - an index per rule keyed by the raw client key, in front of the LRU: no storage key is built
 *   (and no new string hashed) for a key already tracked;
 * - the state looked up last, kept aside: a hot key asked again costs two comparisons;
 * - recency refreshed lazily (`#refreshEvery`), and refreshes that fell due queued and made only
 *   when the LRU's order is about to be read;
 * - the states of the last multi-rule consume, reused while nothing was looked up in between.
 */
import { LRUCache } from 'lru-cache';
import type { KeyState } from './engines/engine.js';
import type { Rule } from './policy.js';
import { storageKey } from './stores/keys.js';

/**
 * `lruTouch` of a disposed state. An integer, as every other value of the field: NaN made V8 widen
 * the field of every state (a new hidden class each state migrated to one by one), which took ~4.7 µs
 * per disposed state, 0.44 s of a close() of 94 000 keys.
 */
const DISPOSED = -1;

export interface KeyTableOptions {
  /** Most states tracked; the least recently used is evicted. */
  maxKeys: number;
  /** Opens the state of a (rule, key) seen for the first time. */
  open(rule: Rule, key: string, storageKey: string): KeyState;
  /**
   * A state left the table: evicted (`evicted`), or deleted by a reconfiguration, a sweep or
   * `clear()`. Not called for a state `forget` drops.
   */
  dispose(state: KeyState, evicted: boolean): void;
}

export class KeyTable {
  readonly #entries: LRUCache<string, KeyState>;
  readonly #open: KeyTableOptions['open'];
  /** Evicted states that still hold something needing upkeep (held concurrency slots). */
  readonly #pinned = new Set<KeyState>();
  /**
   * The LRU's states by rule and client key: a lookup skips building the storage key (and hashing
   * a new string) on every decision.
   */
  readonly #byKey = new Map<Rule, Map<string, KeyState>>();
  /**
   * The state looked up last. A hot key asked again skips building its storage key and the LRU
   * lookup; it is already the most recently used entry, so recency stays right.
   */
  #lastRule: Rule | undefined;
  #lastKey = '';
  #lastState: KeyState | undefined;
  /** LRU lookups and insertions so far (`state`): a multi-rule consume's states stay valid while it holds. */
  #touches = 0;
  /**
   * A state's LRU recency is refreshed only when more lookups than this came since its last
   * refresh (a quarter of `maxKeys`). Until then at most that many entries moved ahead of it, so it
   * is nowhere near the end the LRU evicts from; skipping the refresh saves an LRU lookup on most
   * hits. The price: a key used within the last three quarters of `maxKeys` lookups is still never
   * evicted, where an exact LRU would keep any key used within the last `maxKeys`.
   */
  readonly #refreshEvery: number;
  /**
   * Recency refreshes not yet made in the LRU, in the order they fell due, each with `#touches`
   * then (`#unrefreshedAt`); an entry is superseded by a later refresh of its state (the state's
   * `lruTouch` no longer matches) or by its eviction. The LRU's order is read only when an insertion
   * may evict, a sweep visits the states (most recent first), and reconfiguration and `clear()`
   * hand leases back: the refreshes are made just before, in order, which leaves the order exactly
   * as refreshing at once would. A state refreshed many times in between costs one LRU lookup (a
   * move in its list: a few cache misses on a large table), not one per refresh.
   */
  readonly #unrefreshed: (KeyState | undefined)[] = [];
  readonly #unrefreshedAt: number[] = [];
  /**
   * Entries of `#unrefreshed` in use, from the first. The arrays are written in place and never
   * shortened: emptied by setting their length, they grew again from nothing after every sweep,
   * each larger copy of them (up to two per state) surviving a scavenge and promoted, to die in
   * the next mark-compact. Slots past the count hold nothing (a state there would be kept alive).
   */
  #unrefreshedCount = 0;
  /**
   * The states the last multi-rule consume looked up (the first `#multiCount`; 0: none), and
   * `#touches` then. Kept in place: remembering allocates nothing.
   */
  readonly #multi: KeyState[] = [];
  #multiCount = 0;
  #multiTouches = 0;
  /** States disposed so far: a multi-rule consume whose own lookups evicted one is not remembered. */
  #disposals = 0;
  /** Storage keys being forgotten: their disposal hands nothing back. */
  readonly #forgetting = new Set<string>();

  constructor(options: KeyTableOptions) {
    const { maxKeys, dispose } = options;
    this.#open = options.open;
    this.#refreshEvery = Math.floor(maxKeys / 4);
    this.#entries = new LRUCache<string, KeyState>({
      max: maxKeys,
      dispose: (state, id, reason) => {
        if (state === this.#lastState) {
          this.#lastRule = undefined;
          this.#lastState = undefined;
        }
        this.#multiCount = 0;
        this.#disposals++;
        state.lruTouch = DISPOSED; // supersedes its refreshes not yet made
        state.nextCheck = undefined; // a disposed state keeps no other alive
        const keys = this.#byKey.get(state.rule);
        if (keys?.get(state.key) === state) keys.delete(state.key);
        // A forgotten key's leased tokens belong to the state being deleted: nothing to hand back.
        if (this.#forgetting.has(id)) return;
        dispose(state, reason === 'evict');
      },
    });
  }

  /** States tracked. */
  get size(): number {
    return this.#entries.size;
  }

  /** The state of (`rule`, `key`), opened when it is not tracked; counts as a use for the LRU. */
  state(rule: Rule, key: string): KeyState {
    if (this.#lastRule === rule && this.#lastKey === key) return this.#lastState!;
    return this.#used(rule, key, this.#byRule(rule).get(key));
  }

  /**
   * `state(rule, key)` for the check after the one whose state is `previous`, in a multi-rule
   * consume: when the same checks came together last time, the state is `previous.nextCheck` and
   * no index is searched (on a long tail of keys, a search is cache misses). The same use for the
   * LRU as `state`.
   */
  stateAfter(previous: KeyState, rule: Rule, key: string): KeyState {
    if (this.#lastRule === rule && this.#lastKey === key) return this.#lastState!;
    const linked = previous.nextCheck;
    // A disposed state's `lruTouch` is `DISPOSED`: it is in no index any more.
    if (linked !== undefined && linked.rule === rule && linked.key === key && linked.lruTouch !== DISPOSED) {
      return this.#used(rule, key, linked);
    }
    const state = this.#used(rule, key, this.#byRule(rule).get(key));
    previous.nextCheck = state;
    return state;
  }

  #byRule(rule: Rule): Map<string, KeyState> {
    let keys = this.#byKey.get(rule);
    if (!keys) {
      keys = new Map();
      this.#byKey.set(rule, keys);
    }
    return keys;
  }

  /** Counts a use of the state of (`rule`, `key`), tracked (`found`) or opened now. */
  #used(rule: Rule, key: string, found: KeyState | undefined): KeyState {
    let state = found;
    this.#touches++;
    if (state) {
      if (this.#touches - (state.lruTouch ?? Number.NEGATIVE_INFINITY) > this.#refreshEvery) {
        state.lruTouch = this.#touches;
        const n = this.#unrefreshedCount++;
        this.#unrefreshed[n] = state;
        this.#unrefreshedAt[n] = this.#touches;
        // Superseded entries are dropped before they outnumber the states.
        if (n >= 2 * this.#entries.size + 64) this.#dropSuperseded();
      }
    } else {
      const id = storageKey(rule.algorithm, rule.name, key);
      state = this.#open(rule, key, id);
      this.#refreshRecency();
      this.#entries.set(id, state);
      this.#byRule(rule).set(key, state);
      state.lruTouch = this.#touches;
    }
    // Three fields, not one object: a lookup that changes key allocates nothing.
    this.#lastRule = rule;
    this.#lastKey = key;
    this.#lastState = state;
    return state;
  }

  /** The state of (`rule`, `key`) if tracked, without opening one or counting a use. */
  find(rule: Rule, key: string): KeyState | undefined {
    return this.#byKey.get(rule)?.get(key);
  }

  /** The state tracked under `storageKey`, if any, without counting a use. */
  peek(storageKey: string): KeyState | undefined {
    return this.#entries.peek(storageKey);
  }

  /** Keeps `state` swept after its eviction, until `unpin` (see `EngineContext.pin`). */
  pin(state: KeyState): void {
    this.#pinned.add(state);
  }

  unpin(state: KeyState): void {
    this.#pinned.delete(state);
  }

  /** Drops the state under `storageKey` without disposing of what it holds (a reset key). */
  forget(storageKey: string): void {
    this.#forgetting.add(storageKey);
    try {
      this.#entries.delete(storageKey);
    } finally {
      this.#forgetting.delete(storageKey);
    }
  }

  /**
   * Disposes of the states whose rule is not `rules`' rule of that name any more; returns the
   * storage keys of those whose rule `rules` changed (not removed).
   */
  keepRules(rules: ReadonlyMap<string, Rule>): string[] {
    for (const rule of this.#byKey.keys()) if (rules.get(rule.name) !== rule) this.#byKey.delete(rule);
    this.#refreshRecency();
    const stale = [...this.#entries.entries()].filter(([, e]) => rules.get(e.rule.name) !== e.rule);
    for (const [id] of stale) this.#entries.delete(id); // dispose hands the unused tokens back
    return stale.filter(([, e]) => rules.has(e.rule.name)).map(([id]) => id);
  }

  /**
   * Sweeps every state, most recently used first (`KeyState.sweep`), dropping those that hold
   * nothing worth keeping, then the pinned states no longer in the table.
   */
  sweep(now: number): void {
    this.#refreshRecency();
    // forEach: no [key, value] array per entry, as the entries() iterator makes (same order).
    this.#entries.forEach((state, id) => {
      if (state.sweep(now)) this.#entries.delete(id);
    });
    for (const state of this.#pinned) {
      if (this.#entries.peek(state.storageKey) !== state) state.sweep(now);
    }
  }

  /** Disposes of every state, most recently used first; the pinned ones hand back what they hold. */
  clear(): void {
    this.#refreshRecency();
    this.#entries.clear(); // dispose returns each entry's unused tokens
    for (const state of this.#pinned) state.returnUnused('closed');
  }

  /** Lookups and disposals so far: equal counts mean no state was looked up, opened or disposed between. */
  get touches(): number {
    return this.#touches;
  }

  get disposals(): number {
    return this.#disposals;
  }

  /**
   * Whether the states of a multi-rule consume's `n` checks are those of the last one with no
   * lookup in between; if so they are copied into `states`. Its lookups then need not be repeated:
   * they would touch the same entries in the same order, already the most recent in that order, so
   * they would change nothing.
   */
  remembered(rules: readonly Rule[], keys: readonly string[], n: number, states: KeyState[]): boolean {
    const memo = this.#multi;
    if (this.#multiCount !== n || this.#multiTouches !== this.#touches) return false;
    for (let i = 0; i < n; i++) {
      if (memo[i]!.rule !== rules[i] || memo[i]!.key !== keys[i]) return false;
    }
    for (let i = 0; i < n; i++) states[i] = memo[i]!;
    const last = memo[n - 1]!;
    this.#lastRule = last.rule;
    this.#lastKey = last.key;
    this.#lastState = last;
    return true;
  }

  /** Remembers the `n` states a multi-rule consume just looked up, in order (`remembered`). */
  remember(states: readonly KeyState[], n: number): void {
    for (let i = 0; i < n; i++) this.#multi[i] = states[i]!;
    this.#multiCount = n;
    this.#multiTouches = this.#touches;
  }

  /** Makes the recency refreshes due (`#unrefreshed`), in order: the LRU's order is about to be read. */
  #refreshRecency(): void {
    const states = this.#unrefreshed;
    const at = this.#unrefreshedAt;
    const n = this.#unrefreshedCount;
    // The storage key is the state's own string, its hash already computed.
    for (let i = 0; i < n; i++) {
      const state = states[i]!;
      states[i] = undefined;
      if (state.lruTouch === at[i]) this.#entries.get(state.storageKey);
    }
    this.#unrefreshedCount = 0;
  }

  /** Drops the superseded entries of `#unrefreshed`, keeping the order of the others. */
  #dropSuperseded(): void {
    const states = this.#unrefreshed;
    const at = this.#unrefreshedAt;
    const n = this.#unrefreshedCount;
    let kept = 0;
    for (let i = 0; i < n; i++) {
      const state = states[i]!;
      if (state.lruTouch !== at[i]) continue;
      states[kept] = state;
      at[kept++] = at[i]!;
    }
    for (let i = kept; i < n; i++) states[i] = undefined;
    this.#unrefreshedCount = kept;
  }
}
