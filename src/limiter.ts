import { randomBytes } from 'node:crypto';
import pLimit from 'p-limit';
import { windowIndex } from './algorithms/fixedWindow.js';
import type { BreakerOptions } from './breaker.js';
import { ClosingStore } from './closing.js';
import {
  type Check,
  type Decision,
  decisionWith,
  type PolicyDescription,
  type Reservation,
  type SlotHandle,
  withChecks,
} from './decision.js';
import { clockOption, MAX_TIMER_MS } from './duration.js';
import type { Consumed, Counters, EngineContext, KeyState, Method } from './engines/engine.js';
import { ENGINES } from './engines/index.js';
import {
  ArgumentError,
  ClosedError,
  ConfigError,
  StoreUnavailableError,
  shown,
  TokenleaseError,
} from './errors.js';
import { Failover } from './failover.js';
import { InFlight } from './inFlight.js';
import { KeyTable } from './keyTable.js';
import type { LimiterStats, Observer } from './observe/events.js';
import type { HeavyHitter } from './observe/spaceSaving.js';
import { type OffendersOptions, Telemetry } from './observe/telemetry.js';
import { knownOptions, noNullOptions } from './options.js';
import { estimated, readOf } from './peek.js';
import { compilePolicies, type PolicyConfig, type Rule } from './policy.js';
import { fleetHeartbeat } from './stores/fleetOps.js';
import { storageKey } from './stores/keys.js';
import { MemoryStore } from './stores/memoryStore.js';
import { resetKey } from './stores/resetOps.js';
import type { Store } from './stores/store.js';

export interface LimiterOptions {
  /** @default new MemoryStore({ now }) (on wall time when `now` is not given) */
  store?: Store;
  policies: Record<string, PolicyConfig>;
  /**
   * Clock in ms for local bookkeeping: denial memory, lease expiry, allowance reports, breaker
   * cool-down, heartbeats (the store keeps its own time). It measures intervals only, so the
   * default never jumps with the wall clock. The simulator passes a virtual one.
   * @default performance.timeOrigin + performance.now()
   */
  now?: () => number;
  /**
   * Most (policy, key) pairs tracked locally; the least recently used is evicted and its unused
   * tokens handed back.
   * @default 100_000
   */
  maxKeys?: number;
  /**
   * Most store calls in flight at once, so a burst of lease misses cannot flood Redis.
   * @default 32
   */
  concurrency?: number;
  /**
   * How often expired leases are handed back (and held concurrency slots renewed), in real time;
   * 0 disables the timer (then call `sweep()` yourself, as the simulator does in virtual time).
   * At most 5000 (heartbeats go out on the sweep), and less than half of every concurrency
   * policy's `slotTtl` (held slots are renewed on it).
   * @default 500
   */
  sweepIntervalMs?: number;
  /**
   * Receivers of decision, store-call, lease and breaker events (metrics, alerts, logs); see
   * docs/observability.md. Without observers no event object is built.
   * @default []
   */
  observers?: readonly Observer[];
  /**
   * The sketch of denied keys per policy behind `topDenied()`, or `false` to keep none.
   * @default { capacity: 256, halfLife: '1m' }
   */
  offenders?: OffendersOptions | false;
  /**
   * Instances expected to share the limits. While the store is unreachable, a rule failing
   * `'local'` admits `1 / expectedInstances` of its limit per instance (or the instance's share of
   * the key's recent leases, when larger). See docs/operations.md.
   * @default 1
   */
  expectedInstances?: number;
  /**
   * Longest `close()` keeps trying to hand leased tokens back to a store that stalls (a write
   * pause, a slow failover), in ms: a hand-back waits for its answer up to then, and one that was
   * certainly not sent (breaker open, connection down) is tried again. What is still not back then
   * is counted in `stats().tokensStranded`. `close()` returns within this plus one `timeoutMs`;
   * 0 gives each hand-back a single try.
   * @default 2000
   */
  closeTimeoutMs?: number;
  /**
   * Circuit breaker in front of the store.
   * @default { failures: 3, coolDown: '250ms' }
   */
  breaker?: BreakerOptions;
}

export interface ReserveOptions {
  /**
   * Longest acceptable wait in ms: a turn further ahead is refused. At most 2^31 − 1 (a timer's
   * longest delay).
   * @default the policy's `maxWait`
   */
  maxWaitMs?: number;
}

export interface WaitOptions extends ReserveOptions {
  /**
   * Aborting it ends the wait (rejecting with the signal's reason) and gives the turn back.
   * @default undefined (the wait cannot be cancelled)
   */
  signal?: AbortSignal;
}

export interface AcquireOptions {
  /**
   * Slots to hold (a whole number).
   * @default 1
   */
  cost?: number;
}

function checkCost(cost: unknown, field: string, rule: Rule): number {
  if (typeof cost !== 'number' || !Number.isFinite(cost) || cost <= 0) {
    throw new ArgumentError(field, `expected a positive finite number, got ${String(cost)}`);
  }
  if ('wholeUnits' in rule && rule.wholeUnits && !Number.isInteger(cost)) {
    throw new ArgumentError(field, `${rule.algorithm} counts whole units: expected an integer, got ${cost}`);
  }
  return cost;
}

/**
 * Milliseconds on the epoch scale that never jump: wall time at process start plus the monotonic
 * time since. Intervals (denial memory, lease expiry, breaker cool-down) survive NTP steps.
 */
function monotonicNow(): number {
  return TIME_ORIGIN + performance.now();
}

/** Read once: `performance.timeOrigin` is a getter that does work on every read. */
const TIME_ORIGIN = performance.timeOrigin;

/**
 * A multi-rule consume is allowed if every rule allowed, reporting the rule closest to its limit;
 * else the allowed ones are refunded, reporting the denied rule that frees up last. This is that
 * denied rule, or undefined when every rule allowed. One pass, no intermediate arrays: this runs for
 * every multi-rule request.
 */
function refusal(checks: readonly Decision[]): Decision | undefined {
  let latest: Decision | undefined;
  for (const d of checks) {
    if (!d.allowed && (latest === undefined || d.retryAfterMs > latest.retryAfterMs)) latest = d;
  }
  return latest;
}

/** Of rules that all allowed, the one closest to its limit. */
function tightest(checks: readonly Decision[]): Decision {
  let tight = checks[0]!;
  for (let i = 1; i < checks.length; i++) {
    const d = checks[i]!;
    if (d.remaining / d.limit < tight.remaining / tight.limit) tight = d;
  }
  return tight;
}

/** A single-check consume's answer: the decision, listing itself as its one check. */
function alone(decision: Decision): Decision {
  return withChecks(decision, [decision]);
}

function aloneOf(consumed: Consumed): Decision {
  return alone(consumed.decision);
}

function decisionOf(consumed: Consumed): Decision {
  return consumed.decision;
}

/**
 * A multi-rule consume's working arrays, indexed by check: validated rules, keys and costs, the
 * states looked up, the windows their tokens came from. Only the first `checks.length` entries of a
 * consume are its own.
 */
interface Scratch {
  readonly rules: Rule[];
  readonly keys: string[];
  readonly costs: number[];
  readonly states: KeyState[];
  readonly windows: number[];
}

function newScratch(): Scratch {
  return { rules: [], keys: [], costs: [], states: [], windows: [] };
}

/** lru-cache allocates its index for `max` entries up front: 1e8 took 3.2 GB, 1e9 killed Node. */
const MAX_KEYS = 10_000_000;
/** The options of `LimiterOptions` (anything else is a typo, refused by name). */
const LIMITER_OPTIONS: readonly (keyof LimiterOptions)[] = [
  'store',
  'policies',
  'now',
  'maxKeys',
  'concurrency',
  'sweepIntervalMs',
  'observers',
  'offenders',
  'expectedInstances',
  'closeTimeoutMs',
  'breaker',
];

/** An optional options argument: absent, or an object (plain JS callers pass anything). */
function optionsArgument<T extends object>(
  value: T | undefined,
  known: readonly (keyof T & string)[],
): T | Record<string, never> {
  if (value === undefined) return {};
  if (typeof value !== 'object' || value === null) {
    throw new ArgumentError('options', `expected an options object, got ${String(value)}`);
  }
  knownOptions(value, known, 'options', ArgumentError);
  return value;
}

function positiveInteger(value: unknown, field: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1) {
    throw new ConfigError(field, `expected an integer from 1 and up, got ${String(value)}`);
  }
  return value;
}

/** The methods each algorithm answers, as sets: looked up on every call. */
const ANSWERS = new Map<string, ReadonlySet<Method>>(
  Object.entries(ENGINES).map(([algorithm, engine]) => [algorithm, new Set<Method>(engine.methods)]),
);

interface CheckFields {
  policy: string;
  key: string;
  cost: string;
}

/** Checks of a multi-rule consume whose field names and rules are kept, from the first. */
const CHECK_FIELDS_KEPT = 16;
/** Field names of `checks[i]` for errors, built once for the first indexes rather than per call. */
const CHECK_FIELDS: CheckFields[] = [];

function checkFields(i: number): CheckFields {
  const cached = CHECK_FIELDS[i];
  if (cached !== undefined) return cached;
  const fields = { policy: `checks[${i}].policy`, key: `checks[${i}].key`, cost: `checks[${i}].cost` };
  if (i < CHECK_FIELDS_KEPT) CHECK_FIELDS[i] = fields;
  return fields;
}

/** The rules whose algorithm answers `consume`, by name. */
function consumable(rules: ReadonlyMap<string, Rule>): Map<string, Rule> {
  const out = new Map<string, Rule>();
  for (const [name, rule] of rules) if (ANSWERS.get(rule.algorithm)?.has('consume')) out.set(name, rule);
  return out;
}

/** How often an instance tells the store it is alive, in ms of the limiter's clock. */
const HEARTBEAT_MS = 2000;
/** An instance counts in the fleet this long after its last heartbeat. */
const FLEET_WINDOW_MS = 10_000;
/**
 * Longest `sweepIntervalMs`: heartbeats go out on the sweep, and an instance whose beats came
 * further apart than the fleet window would drop out of the count between them, making every
 * other instance's share too large.
 */
const MAX_SWEEP_MS = FLEET_WINDOW_MS / 2;
/** Longest `closeTimeoutMs`: a shutdown that waits longer on a store is better off stranding. */
const MAX_CLOSE_TIMEOUT_MS = 60_000;

function closeTimeout(value: unknown): number {
  if (typeof value !== 'number' || !(value >= 0 && value <= MAX_CLOSE_TIMEOUT_MS)) {
    throw new ConfigError(
      'closeTimeoutMs',
      `expected a number of ms from 0 to ${MAX_CLOSE_TIMEOUT_MS}, got ${String(value)}`,
    );
  }
  return value;
}

function sweepInterval(value: unknown): number {
  if (typeof value !== 'number' || !(value >= 0 && value <= MAX_SWEEP_MS)) {
    throw new ConfigError(
      'sweepIntervalMs',
      `expected a number of ms from 0 (no timer) to ${MAX_SWEEP_MS}, got ${String(value)}`,
    );
  }
  return value;
}

/**
 * Held concurrency slots are renewed on the first sweep after half their `slotTtl`: a sweep
 * interval of half the TTL or more would let them expire while still held.
 */
function checkSlotRenewal(rules: ReadonlyMap<string, Rule>, sweepMs: number): void {
  if (sweepMs === 0) return;
  for (const rule of rules.values()) {
    if (rule.algorithm !== 'concurrency' || sweepMs < rule.slotTtlMs / 2) continue;
    throw new ConfigError(
      `policies.${rule.name}.slotTtl`,
      `slots are renewed on the sweep, so \`slotTtl\` (${rule.slotTtlMs} ms) must be more than twice ` +
        `\`sweepIntervalMs\` (${sweepMs} ms); raise slotTtl or lower sweepIntervalMs`,
    );
  }
}
/** Where the fleet is counted: a key no client key can produce (those start `{k:` or `{h:`). */
const FLEET_KEY = '{fleet}:instances';

/** Resolves after `ms` of timer time; rejects with the signal's reason as soon as it aborts. */
function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** The key of `Limiter`'s `consume` that may answer synchronously (see there). */
export const consumeNow: unique symbol = Symbol('tokenlease.consumeNow');
/** The key of `Limiter`'s clock as its last decision read it, for the HTTP adapters (see there). */
export const decidedAt: unique symbol = Symbol('tokenlease.decidedAt');
/** The key of `Limiter`'s `describe(policy)` for the HTTP adapters' headers (see there). */
export const headerFacts: unique symbol = Symbol('tokenlease.headerFacts');

/** What the HTTP adapters' headers need of a policy on every request. */
export interface HeaderFacts {
  readonly windowSeconds: number;
  /**
   * A fixed window: what it admitted comes back only when it ends, not little by little as a
   * bucket's or a sliding window's does.
   */
  readonly resetsAtEnd: boolean;
}

/**
 * Decides each request from tokens leased out of a shared store, going to the store only when a
 * lease runs low or out. Each algorithm plugs in as an engine (`src/engines/`). See docs/architecture.md
 * for the guarantees.
 */
export class Limiter {
  #rules: Map<string, Rule>;
  /** The rules `consume` answers, by name: the hot path finds and checks a rule in one lookup. */
  #consumable: Map<string, Rule>;
  /**
   * The rule `consume` last found for the check at each position (the one-rule form is position 0)
   * and the name it was asked by: callers ask for the same names in the same places request after
   * request, and comparing a name costs less than a lookup. Emptied when the policies change.
   */
  readonly #namedAt: string[] = [];
  readonly #ruleAt: Rule[] = [];
  readonly #now: () => number;
  /** The key state of each (policy, key) tracked locally. */
  readonly #table: KeyTable;
  /**
   * While a multi-rule consume decides its rules: the time they are all decided at (one clock read
   * for all of them, not one per rule); NaN otherwise (a number field: setting it allocates nothing).
   */
  #instant = Number.NaN;
  /** The clock as a decision since the last `consumeNow` began last read it; NaN before one did. */
  #lastRead = Number.NaN;
  /** The working arrays of multi-rule consumes; undefined while one is deciding. */
  #scratch: Scratch | undefined = newScratch();
  /** Background store calls `close()` waits for. */
  readonly #pending = new InFlight();
  /** `describe`'s answers by rule, with the window each holds for. */
  readonly #described = new Map<Rule, { window: number; description: PolicyDescription & HeaderFacts }>();
  readonly #timer: NodeJS.Timeout | undefined;
  readonly #sweepMs: number;
  readonly #telemetry: Telemetry;
  readonly #failover: Failover;
  /** The store as engines see it: from `close()` on, hand-backs keep trying for `closeTimeoutMs`. */
  readonly #closingStore: ClosingStore;
  readonly #stats: Counters = {
    storeCalls: 0,
    storeErrors: 0,
    leasesGranted: 0,
    tokensLeased: 0,
    tokensReturned: 0,
    tokensAllowed: 0,
    tokensReported: 0,
    localDecisions: 0,
    decisions: 0,
  };
  /** What every rule's key states share of their `EngineContext` (`#contextOf`). */
  readonly #shared: Omit<EngineContext, 'answer'>;
  /** The engine context of each rule's key states, made at the rule's first key. */
  readonly #contexts = new Map<Rule, EngineContext>();
  #closing: Promise<void> | undefined;
  /**
   * Storage keys whose state the last `setPolicies` replaced, until their new state opens: a
   * changed rule's key is not a first sight (one more request per instance and key than the new
   * limit, admitted before the store answers). At most `maxKeys`, replaced at every `setPolicies`.
   */
  #replaced = new Set<string>();
  readonly #instanceId: string;
  /** Instances the store counted at the last heartbeat; 0 before the first answer. */
  #fleet = 0;
  #lastBeat = Number.NEGATIVE_INFINITY;
  #beats = 0;
  #beating = false;

  constructor(options: LimiterOptions) {
    if (typeof options !== 'object' || options === null)
      throw new ConfigError('options', 'expected an object');
    knownOptions(options, LIMITER_OPTIONS);
    noNullOptions(options);
    for (const nested of ['breaker', 'offenders'] as const) {
      const value = options[nested];
      if (typeof value === 'object') noNullOptions(value, nested);
    }
    clockOption(options.now);
    this.#rules = compilePolicies(options.policies);
    this.#consumable = consumable(this.#rules);
    this.#now = options.now ?? monotonicNow;
    // The embedded store keeps wall time (calendar windows) unless a clock was given.
    const store = options.store ?? new MemoryStore(options.now ? { now: options.now } : {});
    if (typeof store.run !== 'function')
      throw new ConfigError('store', 'expected a Store (MemoryStore or RedisStore)');
    const gate = pLimit(positiveInteger(options.concurrency ?? 32, 'concurrency'));
    const maxKeys = positiveInteger(options.maxKeys ?? 100_000, 'maxKeys');
    if (maxKeys > MAX_KEYS) {
      throw new ConfigError(
        'maxKeys',
        `expected an integer from 1 to ${MAX_KEYS} (the table preallocates about 32 bytes per key), got ${maxKeys}`,
      );
    }
    this.#table = new KeyTable({
      maxKeys,
      open: (rule, key, id) => {
        const state = ENGINES[rule.algorithm].open(this.#contextOf(rule), rule as never, key, id);
        if (this.#replaced.size > 0 && this.#replaced.delete(id)) state.forgoFirstSight?.();
        return state;
      },
      dispose: (state, evicted) =>
        state.returnUnused(evicted ? 'evicted' : this.#closing ? 'closed' : 'reconfigured'),
    });
    const sweepMs = sweepInterval(options.sweepIntervalMs ?? 500);
    checkSlotRenewal(this.#rules, sweepMs);
    this.#sweepMs = sweepMs;
    this.#telemetry = new Telemetry({
      observers: options.observers,
      offenders: options.offenders,
      now: this.#now,
      policies: () => [...this.#rules.keys()],
      stats: () => this.stats(),
    });
    const telemetry = this.#telemetry;
    // 48 random bits: ids of two limiters collide with odds far below anything else that can go wrong.
    const instanceId = randomBytes(6).toString('base64url');
    const failover = new Failover({
      store: telemetry.instrument(store),
      now: this.#now,
      expectedInstances: options.expectedInstances ?? 1,
      fleet: () => this.#fleet,
      breaker: options.breaker ?? {},
      maxKeys,
      track: (work) => this.#pending.track(work),
      onBreaker: (state) => telemetry.breaker(state),
    });
    this.#failover = failover;
    const closing = new ClosingStore(failover.store, closeTimeout(options.closeTimeoutMs ?? 2000));
    this.#closingStore = closing;
    this.#instanceId = instanceId;
    const limiter = this;
    const expectedInstances = options.expectedInstances ?? 1;
    let ids = 0;
    this.#shared = {
      store: closing,
      gate,
      now: () => {
        if (!Number.isNaN(this.#instant)) return this.#instant;
        this.#lastRead = this.#now();
        return this.#lastRead;
      },
      stats: this.#stats,
      nextId: () => `${instanceId}.${(ids++).toString(36)}`,
      track: (promise) => this.#pending.track(promise),
      peek: (id) => this.#table.peek(id),
      pin: (state) => this.#table.pin(state),
      unpin: (state) => this.#table.unpin(state),
      telemetry: {
        leaseGranted(policy, key, tokens) {
          telemetry.leaseGranted(policy, key, tokens);
          const rule = limiter.#rules.get(policy);
          if (rule) failover.granted(storageKey(rule.algorithm, rule.name, key), tokens);
        },
        leaseReturned: (...args) => telemetry.leaseReturned(...args),
        stranded: (...args) => telemetry.stranded(...args),
      },
      suspended: (storageKey) => failover.store.suspended(storageKey),
      fleet: () => (this.#fleet === 0 ? 0 : Math.max(this.#fleet, expectedInstances)),
      get closed() {
        return limiter.#closing !== undefined;
      },
    };
    if (sweepMs > 0) {
      this.#timer = setInterval(() => this.sweep(), sweepMs).unref();
      this.#heartbeat(this.#now());
    }
  }

  /** Takes `cost` tokens of `policy` for `key`; resolves to a decision, never rejects for being limited. */
  consume(policy: string, key: string, cost?: number): Promise<Decision>;
  /** All-or-nothing across rules: if any is denied, tokens taken by the others are put back. */
  consume(checks: readonly Check[]): Promise<Decision>;
  consume(policyOrChecks: string | readonly Check[], key?: string, cost = 1): Promise<Decision> {
    // Not an async function: a decision made from local state resolves without a promise chain
    // (no await of a value that is not a promise), and errors still reject, never throw.
    try {
      const decision = this[consumeNow](policyOrChecks as string, key, cost);
      return decision instanceof Promise ? decision : Promise.resolve(decision);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /**
   * `consume` for the HTTP adapters: the decision itself when local state made it (lease hits),
   * else its promise; throws what `consume` would reject with. An adapter that applies the
   * decision at once saves a promise and a turn of the microtask queue per request.
   */
  [consumeNow](policy: string, key?: string, cost?: number): Decision | Promise<Decision>;
  [consumeNow](checks: readonly Check[]): Decision | Promise<Decision>;
  [consumeNow](
    policyOrChecks: string | readonly Check[],
    key?: string,
    cost = 1,
  ): Decision | Promise<Decision> {
    if (this.#closing) throw new ClosedError('Limiter');
    this.#lastRead = Number.NaN;
    if (typeof policyOrChecks !== 'string' && Array.isArray(policyOrChecks)) {
      return this.#consumeAll(policyOrChecks);
    }
    // Anything not a list of checks is validated there as the policy name.
    const rule = this.#consumeRule(policyOrChecks, 0, 'policy');
    const k = this.#key(key, 'key');
    const c = checkCost(cost, 'cost', rule);
    this.#stats.decisions++;
    const state = this.#table.state(rule, k);
    const decision = state.decideLocal?.(c);
    if (decision !== undefined) return decision;
    return this.#checkStore(state, rule, k, c).then(decisionOf);
  }

  #consumeAll(checks: readonly Check[]): Decision | Promise<Decision> {
    const n = checks.length;
    if (n === 0) throw new ArgumentError('checks', 'expected at least one check');
    // Into the limiter's own arrays unless another multi-rule consume is deciding (an observer
    // called back): a lease hit on several rules allocates nothing but its answer.
    const scratch = this.#scratch ?? newScratch();
    this.#scratch = undefined;
    try {
      return this.#decideAll(checks, n, scratch);
    } finally {
      this.#scratch = scratch;
    }
  }

  #decideAll(checks: readonly Check[], n: number, scratch: Scratch): Decision | Promise<Decision> {
    const { rules, keys, costs, states, windows } = scratch;
    // Every check is validated before any takes a token.
    for (let i = 0; i < n; i++) {
      const c = checks[i];
      if (typeof c !== 'object' || c === null)
        throw new ArgumentError(`checks[${i}]`, 'expected { policy, key, cost? }');
      if (c.route !== undefined && typeof c.route !== 'string') {
        throw new ArgumentError(`checks[${i}].route`, `expected a string, got ${typeof c.route}`);
      }
      if (c.shadow !== undefined && typeof c.shadow !== 'boolean') {
        throw new ArgumentError(`checks[${i}].shadow`, `expected a boolean, got ${typeof c.shadow}`);
      }
      const field = checkFields(i);
      const rule = this.#consumeRule(c.policy, i, field.policy);
      rules[i] = rule;
      keys[i] = this.#key(c.key, field.key);
      costs[i] = checkCost(c.cost === undefined ? 1 : c.cost, field.cost, rule);
    }
    const table = this.#table;
    if (n === 1) {
      // One check (an HTTP adapter's single rule, with its route for observers): nothing to refund.
      this.#stats.decisions++;
      const state = table.state(rules[0]!, keys[0]!);
      const decision = state.decideLocal?.(costs[0]!, checks[0]);
      if (decision !== undefined) return alone(decision);
      return this.#checkStore(state, rules[0]!, keys[0]!, costs[0]!, checks[0]).then(aloneOf);
    }
    const remembered = table.remembered(rules, keys, n, states);
    const disposals = table.disposals;
    const touches = table.touches;
    // Each rule's decision, or its store call; for a local decision, what its tokens came from.
    const outcomes: (Decision | Promise<Consumed>)[] = new Array(n);
    let waits = false;
    const outer = this.#instant;
    if (Number.isNaN(outer)) {
      this.#instant = this.#now();
      this.#lastRead = this.#instant;
    }
    try {
      for (let i = 0; i < n; i++) {
        this.#stats.decisions++;
        // Looked up just before its decision, as a lookup may evict the state of an earlier check;
        // remembered ones while nothing (an observer calling back, say) looked up or evicted since.
        const unchanged = touches === table.touches && disposals === table.disposals;
        const state =
          remembered && unchanged
            ? states[i]!
            : i === 0
              ? table.state(rules[0]!, keys[0]!)
              : table.stateAfter(states[i - 1]!, rules[i]!, keys[i]!);
        states[i] = state;
        // A lease hit returns without a promise and allocates nothing for a refund.
        const local = state.decideLocal?.(costs[i]!, checks[i]);
        if (local !== undefined) {
          outcomes[i] = local;
          windows[i] = state.reportWindow ?? 0;
        } else {
          outcomes[i] = this.#checkStore(state, rules[i]!, keys[i]!, costs[i]!, checks[i]);
          waits = true;
        }
      }
    } finally {
      this.#instant = outer;
    }
    if (!remembered && disposals === table.disposals) table.remember(states, n);
    // All answered from local state: no promise to wait for, and the array is the checks.
    if (!waits) {
      const checked = outcomes as Decision[];
      const refused = refusal(checked);
      if (refused === undefined) return withChecks(tightest(checked), checked);
      // The allowed rules are refunded, so each reports what is left after the refund.
      for (let i = 0; i < n; i++) {
        const d = checked[i]!;
        if (d.allowed) checked[i] = states[i]!.refundLocal!(costs[i]!, d, windows[i]!);
      }
      return withChecks(refused, checked);
    }
    // What the refunds need, as the rules decided: the scratch arrays serve the next consume.
    const admitted = states.slice(0, n);
    const taken = costs.slice(0, n);
    const from = windows.slice(0, n);
    const refundLocal = (i: number, decision: Decision) =>
      admitted[i]!.refundLocal!(taken[i]!, decision, from[i]!);
    return Promise.allSettled(outcomes).then((settled) => {
      const checked: Decision[] = new Array(n);
      const refunds: ((() => Decision) | undefined)[] = new Array(n);
      let failure: PromiseRejectedResult | undefined;
      for (let i = 0; i < n; i++) {
        const s = settled[i]!;
        if (s.status === 'rejected') {
          failure ??= s;
          continue;
        }
        const value = s.value;
        if ('decision' in value) {
          checked[i] = value.decision;
          refunds[i] = value.refund;
        } else {
          checked[i] = value;
          refunds[i] = () => refundLocal(i, value);
        }
      }
      const refused = failure === undefined ? refusal(checked) : undefined;
      if (failure === undefined && refused === undefined) return withChecks(tightest(checked), checked);
      // The allowed rules are refunded before the failure surfaces, and report what is left after.
      for (let i = 0; i < n; i++) {
        if (checked[i]?.allowed) checked[i] = refunds[i]?.() ?? checked[i]!;
      }
      if (failure !== undefined) throw failure.reason;
      return withChecks(refused!, checked);
    });
  }

  /**
   * What a `consume(policy, key, 1)` would see now, taking nothing: `allowed` says whether it would
   * pass, `remaining` is what is left before it, `resetMs` and `limit` as a consume reports them.
   * Answered from the key's local state when that knows better than the store (a held lease),
   * else by a read-only store call that writes nothing (no key is created). Not counted as a
   * decision; rejects with the store's error when the store fails (no fail policy applies).
   * Policies answering `consume()` (not concurrency).
   */
  async peek(policy: string, key: string): Promise<Decision> {
    if (this.#closing) throw new ClosedError('Limiter');
    const rule = this.#rule(policy, 'policy', 'consume');
    const k = this.#key(key, 'key');
    // An exact policy holds nothing here: its local state only remembers the last answer, and the
    // store knows better.
    const exact = 'exact' in rule && rule.exact;
    const local = exact ? undefined : this.#table.find(rule, k)?.estimate?.();
    if (local !== undefined) return decisionWith(local, { source: 'lease' as const });
    const read = readOf(rule)!;
    this.#stats.storeCalls++;
    const id = storageKey(rule.algorithm, rule.name, k);
    const e = await this.#failover.store.run(read.op, id, read.req).catch((err: unknown) => {
      this.#stats.storeErrors++;
      throw err;
    });
    return decisionWith(estimated(rule, k, read.limit, e), { source: 'store' as const });
  }

  /**
   * Gives back `cost` tokens that an allowed `consume` of `policy` for `key` took, e.g. for a
   * request that should not count after all (a failed upstream call). Token bucket and fixed and
   * sliding window policies; the tokens go to the local lease when one is held, else to the store
   * (a window's tokens only to the window they came from: a window that ended is not raised).
   */
  async refund(policy: string, key: string, cost = 1): Promise<void> {
    if (this.#closing) throw new ClosedError('Limiter');
    const rule = this.#rule(policy, 'policy', 'consume');
    const state = this.#table.state(rule, this.#key(key, 'key'));
    const c = checkCost(cost, 'cost', rule);
    if (!state.refund) {
      throw new ArgumentError(
        'policy',
        `policy ${JSON.stringify(policy)} is a ${rule.algorithm} policy: refunds by key exist for token-bucket, fixed-window and sliding-window policies`,
      );
    }
    await state.refund(c);
  }

  /**
   * Forgets everything about `key` under `policy`, here and in the store: its next request finds a
   * full bucket or an empty window. Leases other instances hold stay theirs (they hand them back
   * into the fresh state, capped at the limit). Rejects with a store error when the store fails.
   */
  async reset(policy: string, key: string): Promise<void> {
    if (this.#closing) throw new ClosedError('Limiter');
    const rule = this.#rule(policy, 'policy');
    const id = storageKey(rule.algorithm, rule.name, this.#key(key, 'key'));
    this.#table.forget(id);
    this.#stats.storeCalls++;
    await this.#failover.store.run(resetKey, id, null).catch((err: unknown) => {
      this.#stats.storeErrors++;
      throw err;
    });
  }

  /**
   * Whether an observer receives decision events (fixed at construction): the HTTP adapters work
   * out what only those events carry (a request's route) only then.
   */
  get observesDecisions(): boolean {
    return this.#telemetry.observesDecisions;
  }

  /**
   * What a policy allows, for response headers (e.g. `RateLimit-Policy: "per-key";q=100;w=1`):
   * its limit and the whole seconds it takes to restore the limit from empty.
   */
  describe(policy: string): PolicyDescription {
    const { limit, windowSeconds } = this.#description(policy);
    return { limit, windowSeconds };
  }

  /**
   * The limiter's clock when `consumeNow`'s decision was made (`fresh`: now): what the HTTP
   * adapters' absolute reset times are counted from. A lease hit has just read it, and a read of
   * their own cost a tenth of their work per request.
   */
  [decidedAt](fresh: boolean): number {
    return fresh || Number.isNaN(this.#lastRead) ? this.#now() : this.#lastRead;
  }

  /** `describe(policy)` and what else headers need, with no object made: asked on every request. */
  [headerFacts](policy: string): HeaderFacts {
    return this.#description(policy);
  }

  /** `describe`'s answer as cached, not to be handed out (a caller may change its copy). */
  #description(policy: string): PolicyDescription & HeaderFacts {
    const rule = this.#rule(policy, 'policy');
    // A description depends on the time only through the window it falls in (a calendar month is
    // as long as its month): described once per window, as the HTTP adapters ask on every request.
    // Rules without windows never depend on it, and are not worth a clock read per request.
    const now = 'windowMs' in rule ? this.#now() : 0;
    const window = 'windowMs' in rule ? windowIndex(now, rule.windowMs) : 0;
    let cached = this.#described.get(rule);
    if (cached === undefined || cached.window !== window) {
      const describe = ENGINES[rule.algorithm].describe as (r: Rule, now: number) => PolicyDescription;
      const { limit, windowSeconds } = describe(rule, now);
      const resetsAtEnd = rule.algorithm === 'fixed-window';
      cached = { window, description: { limit, windowSeconds, resetsAtEnd } };
      this.#described.set(rule, cached);
    }
    return cached.description;
  }

  /**
   * Replaces the policies without a restart. Validated eagerly: on a `ConfigError` nothing changes.
   * A policy whose compiled rule is unchanged keeps its local state and leases; a changed or removed
   * one hands its leased tokens back (the shared state under the same name carries on).
   */
  setPolicies(policies: Record<string, PolicyConfig>): void {
    if (this.#closing) throw new ClosedError('Limiter');
    const next = compilePolicies(policies);
    checkSlotRenewal(next, this.#sweepMs);
    for (const [name, rule] of this.#rules) {
      const fresh = next.get(name);
      if (fresh && JSON.stringify(fresh) === JSON.stringify(rule)) next.set(name, rule);
    }
    this.#rules = next;
    this.#consumable = consumable(next);
    this.#namedAt.length = 0;
    this.#ruleAt.length = 0;
    for (const rule of this.#described.keys()) if (next.get(rule.name) !== rule) this.#described.delete(rule);
    for (const rule of this.#contexts.keys()) if (next.get(rule.name) !== rule) this.#contexts.delete(rule);
    this.#replaced = new Set(this.#table.keepRules(next));
  }

  /**
   * Leaky-bucket policies: takes the next turn of the steady drain if it comes within `maxWaitMs`
   * and says how long to wait for it (`delayMs`); refuses — taking nothing — when it is further off.
   * `wait()` is this plus the waiting.
   */
  async reserve(policy: string, key: string, cost = 1, options?: ReserveOptions): Promise<Reservation> {
    if (this.#closing) throw new ClosedError('Limiter');
    const rule = this.#rule(policy, 'policy', 'reserve');
    const k = this.#key(key, 'key');
    const c = checkCost(cost, 'cost', rule);
    const { maxWaitMs } = optionsArgument(options, ['maxWaitMs']);
    // wait() sleeps up to this long, and a Node timer fires at once for a longer delay.
    if (
      maxWaitMs !== undefined &&
      (typeof maxWaitMs !== 'number' || !(maxWaitMs >= 0 && maxWaitMs <= MAX_TIMER_MS))
    ) {
      throw new ArgumentError(
        'options.maxWaitMs',
        `expected a number of ms from 0 to ${MAX_TIMER_MS}, got ${String(maxWaitMs)}`,
      );
    }
    this.#stats.decisions++;
    return this.#table.state(rule, k).reserve!(c, maxWaitMs);
  }

  /**
   * Leaky-bucket policies: slows down before refusing. Resolves with an allowed decision once the
   * request's turn has come (at once if the drain has room), or at once with a refusal when the
   * turn is more than `maxWaitMs` away. Aborting `signal` rejects with its reason and gives the
   * turn back. Decisions use the limiter's clock; the wait itself is a timer.
   */
  async wait(policy: string, key: string, cost = 1, options?: WaitOptions): Promise<Decision> {
    const { signal, maxWaitMs } = optionsArgument(options, ['maxWaitMs', 'signal']);
    if (signal !== undefined && !(signal instanceof AbortSignal)) {
      throw new ArgumentError('options.signal', 'expected an AbortSignal');
    }
    signal?.throwIfAborted();
    const { delayMs, cancel, ...decision } = await this.reserve(policy, key, cost, { maxWaitMs });
    if (!decision.allowed) return decision;
    try {
      signal?.throwIfAborted();
      if (delayMs > 0) await sleep(delayMs, signal);
    } catch (err) {
      await cancel();
      throw err;
    }
    return decision;
  }

  /**
   * Concurrency policies: holds `cost` slots until the handle's `release()`. A refused handle
   * (`allowed: false`) holds nothing. Slots of a process that dies expire after the policy's
   * `slotTtl`; the limiter renews the slots it holds on its sweep.
   */
  async acquire(policy: string, key: string, options?: AcquireOptions): Promise<SlotHandle> {
    if (this.#closing) throw new ClosedError('Limiter');
    const rule = this.#rule(policy, 'policy', 'acquire');
    const k = this.#key(key, 'key');
    const { cost = 1 } = optionsArgument(options, ['cost']);
    checkCost(cost, 'options.cost', rule);
    this.#stats.decisions++;
    return this.#table.state(rule, k).acquire!(cost);
  }

  /**
   * Hands back leases whose time is up and renews held concurrency slots. Runs on a timer unless
   * `sweepIntervalMs` is 0.
   */
  sweep(): void {
    const now = this.#now();
    // The second beat comes soon after the first: it is the one that counts the fleet.
    const beatEvery = this.#beats < 2 ? HEARTBEAT_MS / 4 : HEARTBEAT_MS;
    if (now - this.#lastBeat >= beatEvery || now < this.#lastBeat) this.#heartbeat(now);
    this.#table.sweep(now);
  }

  /** Counters for a health endpoint; cheap enough to call per request. */
  stats(): LimiterStats {
    return {
      ...this.#stats,
      ...this.#telemetry.counts,
      outcomes: this.#telemetry.totals.outcomes(),
      keys: this.#table.size,
      ...this.#failover.stats,
      storeCallsSuspended: this.#failover.store.shortCircuited,
      breaker: this.#failover.store.state(),
      fleet: this.#fleet,
    };
  }

  /**
   * The `n` keys of `policy` denied most often lately (see the `offenders` option), heaviest first:
   * the answer to "one abusive client, or a limit that cuts everyone?".
   */
  topDenied(policy: string, n = 10): HeavyHitter[] {
    return this.#telemetry.topDenied(this.#rule(policy, 'policy').name, n);
  }

  /**
   * Hands every unused leased token (and leased concurrency slot not in use) back and stops;
   * while the store stalls it keeps trying for `closeTimeoutMs`. Idempotent; the store is left open. Slots still in use stay held until released or expired.
   */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      clearInterval(this.#timer);
      this.#closingStore.closing();
      // What close hands back goes to the store at once: its batches bound what is in flight, and
      // 32 at a time could not hand a long tail of keys back within closeTimeoutMs.
      this.#shared.gate.concurrency = Number.POSITIVE_INFINITY;
      await this.#pending.settled();
      this.#table.clear(); // dispose returns each state's unused tokens
      await this.#pending.settled();
      await this.#failover.flush(); // what a fallback admitted, if the store is back
      this.#failover.abandonDebts(); // what it could not write back is counted, not dropped
      this.#closingStore.closed();
      this.#failover.store.stop(); // no background breaker probes after close
      this.#telemetry.close();
    })();
    return this.#closing;
  }

  /** The rule named `name`; with `method`, one whose algorithm answers that method. */
  #rule(name: unknown, field: string, method?: Method): Rule {
    if (method === 'consume') {
      const rule = this.#consumable.get(name as string);
      if (rule !== undefined) return rule;
    }
    const rule = typeof name === 'string' ? this.#rules.get(name) : undefined;
    if (!rule) {
      const known = [...this.#rules.keys()].map((k) => JSON.stringify(k)).join(', ');
      throw new ArgumentError(field, `unknown policy ${shown(name)}; known policies: ${known}`);
    }
    if (method !== undefined && !ANSWERS.get(rule.algorithm)?.has(method)) {
      const { methods } = ENGINES[rule.algorithm];
      throw new ArgumentError(
        field,
        `policy ${JSON.stringify(name)} is a ${rule.algorithm} policy: use ${methods.map((m) => `${m}()`).join(' or ')}`,
      );
    }
    return rule;
  }

  /** `#rule(name, field, 'consume')`, remembered for the check at `position` (`#namedAt`). */
  #consumeRule(name: unknown, position: number, field: string): Rule {
    const named = this.#namedAt[position];
    if (named !== undefined && named === name) return this.#ruleAt[position]!;
    const rule = this.#rule(name, field, 'consume');
    if (position < CHECK_FIELDS_KEPT) {
      this.#namedAt[position] = rule.name;
      this.#ruleAt[position] = rule;
    }
    return rule;
  }

  #key(key: unknown, field: string): string {
    if (typeof key !== 'string') throw new ArgumentError(field, `expected a string, got ${typeof key}`);
    return key;
  }

  /**
   * The engine context of `rule`'s key states: the shared one, with the `answer` that counts their
   * decisions straight into the policy's counts (no lookup by name per decision).
   */
  #contextOf(rule: Rule): EngineContext {
    let ctx = this.#contexts.get(rule);
    if (ctx === undefined) {
      const stats = this.#stats;
      const telemetry = this.#telemetry;
      const counts = telemetry.totals.of(rule.name);
      const observed = telemetry.observesDecisions;
      const answer: EngineContext['answer'] = (storeWaits, cost, check, decision) => {
        const local = storeWaits === 0;
        if (local) stats.localDecisions++;
        decision.source = local ? 'lease' : 'store';
        // An admission nobody observes only counts (what `decided` would do, without its lookups):
        // every lease hit comes here.
        if (decision.allowed && !observed) {
          counts.allowed(local);
          return decision;
        }
        const outcome = decision.allowed ? 'allowed' : check?.shadow ? 'shadow-denied' : 'denied';
        telemetry.decided(counts, decision, cost, check?.route, decision.source, outcome);
        return decision;
      };
      ctx = Object.assign(Object.create(this.#shared) as EngineContext, { answer });
      this.#contexts.set(rule, ctx);
    }
    return ctx;
  }

  async #checkStore(
    state: KeyState,
    rule: Rule,
    key: string,
    cost: number,
    check?: Check,
  ): Promise<Consumed> {
    try {
      return await state.consume!(cost, check);
    } catch (err) {
      // The store failed or is suspended: the rule's fail policy decides (docs/operations.md).
      if (!(err instanceof TokenleaseError) || !err.code.startsWith('ERR_TOKENLEASE_STORE')) throw err;
      const waited = !(err instanceof StoreUnavailableError) || err.reachedStore;
      if (!waited) this.#stats.localDecisions++;
      const consumed = this.#failover.decide(rule, key, state.storageKey, cost);
      const { decision } = consumed;
      const outcome = decision.allowed ? 'failed-open' : 'failed-closed';
      const counts = this.#telemetry.totals.of(rule.name);
      this.#telemetry.decided(counts, decision, cost, check?.route, 'fallback', outcome);
      return consumed;
    }
  }

  /**
   * Tells the store this instance is alive and learns how many are: allowances are shares of a
   * bucket divided by that count (README "Guarantees").
   */
  #heartbeat(now: number): void {
    if (this.#closing || this.#beating) return;
    this.#beating = true;
    this.#lastBeat = now;
    const beat = this.#failover.store
      .run(
        fleetHeartbeat,
        FLEET_KEY,
        { id: this.#instanceId, windowMs: FLEET_WINDOW_MS },
        { background: true },
      )
      .then((n) => {
        // The first count misses instances that started with this one; by the second, every
        // instance up by then has beaten at least once.
        if (++this.#beats >= 2) this.#fleet = n;
      })
      .finally(() => {
        this.#beating = false;
      });
    this.#pending.track(beat);
  }
}
