import type { Cluster, Redis } from 'ioredis';
import { clockOption } from '../duration.js';
import {
  ClosedError,
  ConfigError,
  StoreError,
  StoreTimeoutError,
  StoreUnavailableError,
  shown,
  TokenleaseError,
} from '../errors.js';
import { countOption, isOptionsObject, knownOptions, noNullOptions } from '../options.js';
import { luaScript } from '../scripts.js';
import { Batcher, type BatchItem, type ItemReply } from './batcher.js';
import { deadline } from './deadline.js';
import { isRedisClient, type RedisClient } from './redisClient.js';
import { keySlot } from './slot.js';
import type { Operation, RunOptions, Store } from './store.js';

export interface RedisStoreOptions<C extends RedisClient = RedisClient> {
  /**
   * An ioredis `Redis` or `Cluster`, ioredis 5 or 6. See `safeClient` for the settings the store
   * runs with.
   */
  client: C;
  /**
   * Milliseconds a store call may take before it counts as failed. The limiter sits on every
   * request, so keep this in single-digit milliseconds for a local Redis. At most 60 000.
   * @default 50
   */
  timeoutMs?: number;
  /**
   * Prefix of every key the store writes.
   * @default 'tl:'
   */
  prefix?: string;
  /**
   * Explicit clock in ms, passed to every script. Only for simulators and tests: by default the
   * scripts read Redis `TIME`, so gateway clock skew changes nothing.
   */
  now?: () => number;
  /**
   * Receives operational warnings, e.g. a `maxmemory-policy` that lets Redis evict limiter keys
   * (checked once per store, when its connection is first ready).
   * @default console.warn
   */
  onWarning?: (message: string) => void;
  /**
   * Redis Cluster only: how many hash-tag groups keys are spread over. A batch may only touch one
   * slot, so calls batch together only within a group: fewer groups batch better, more spread
   * load over more slots. Keep it well above the number of masters.
   * @default 128
   */
  slotGroups?: number;
  /** How store calls are batched into round trips. */
  batch?: BatchOptions;
}

export interface BatchOptions {
  /**
   * Most calls in one round trip.
   * @default 256
   */
  maxItems?: number;
  /**
   * Longest a background call (refill ahead, hand-back) waits for others to share its round trip,
   * in ms. Calls a request waits for go at the end of the event-loop turn they were made in.
   * @default 2
   */
  maxWaitMs?: number;
  /**
   * Most batches in flight at once per connection (each Cluster node has its own); more wait,
   * calls a request waits for first.
   * @default 16
   */
  maxInFlight?: number;
}

const BATCH_OPTIONS: readonly (keyof BatchOptions)[] = ['maxItems', 'maxWaitMs', 'maxInFlight'];
const STORE_OPTIONS: readonly (keyof RedisStoreOptions)[] = [
  'client',
  'timeoutMs',
  'prefix',
  'now',
  'onWarning',
  'slotGroups',
  'batch',
];

function batchOptions(options: BatchOptions | undefined): Required<BatchOptions> {
  if (options !== undefined && !isOptionsObject(options)) {
    throw new ConfigError('batch', 'expected an object { maxItems?, maxWaitMs?, maxInFlight? }');
  }
  if (options !== undefined) {
    knownOptions(options, BATCH_OPTIONS, 'batch');
    noNullOptions(options, 'batch');
  }
  const { maxItems = 256, maxWaitMs = 2, maxInFlight = 16 } = options ?? {};
  countOption(maxItems, 'batch.maxItems', 10_000);
  if (typeof maxWaitMs !== 'number' || !Number.isFinite(maxWaitMs) || maxWaitMs < 0 || maxWaitMs > 1000) {
    throw new ConfigError(
      'batch.maxWaitMs',
      `expected a number of ms from 0 to 1000, got ${shown(maxWaitMs)}`,
    );
  }
  countOption(maxInFlight, 'batch.maxInFlight');
  return { maxItems, maxWaitMs, maxInFlight };
}

type Client = Redis | Cluster;

/**
 * Settings without which a lease could be taken twice: a command that timed out or was in flight
 * at a disconnect would be sent again, debiting tokens the caller already gave up on.
 * - `enableOfflineQueue: false`: nothing is queued while disconnected (for a `Cluster`, at its top
 *   level; ioredis forces the queue on for the per-node connections, which only hold commands that
 *   were never sent, so each still runs at most once).
 * - `autoResendUnfulfilledCommands: false`: a `Redis` re-sends unanswered commands after a reconnect
 *   otherwise, even ones that already timed out (for a `Cluster`, in `redisOptions`).
 * - `retryDelayOnFailover: 0` (`Cluster` only): otherwise a command whose node connection closed
 *   while it was in flight is re-sent after that delay, again even after it timed out.
 * - no `commandTimeout`: the store times calls out itself, and must still hear the late answer of
 *   one that timed out (until then no other call for its keys is sent; see `Batcher`). ioredis
 *   would drop that answer.
 * - `enableReadyCheck: false` (`Cluster` only): the ready check sends CLUSTER INFO to one node at
 *   random, without a timeout. A frozen master picked for it left the client connecting forever, so
 *   every key fell back, also those of the healthy masters. The store's `ready()` asks every master
 *   itself, each try within a deadline; a failed cluster answers calls with CLUSTERDOWN, which the
 *   fail policies take as they take any store error.
 */
const SAFE_NODE = {
  enableOfflineQueue: false,
  autoResendUnfulfilledCommands: false,
  commandTimeout: undefined,
} as const;
const SAFE_CLUSTER = { enableOfflineQueue: false, retryDelayOnFailover: 0, enableReadyCheck: false } as const;

/**
 * Reconnect delays of a connection the store owns: ioredis backs off to 2 s by default, which would
 * keep leasing down for that long after Redis is back.
 */
const RECONNECT_MAX_MS = 500;
const reconnectDelay = (attempt: number) => Math.min(attempt * 50, RECONNECT_MAX_MS);
const READY_ATTEMPTS = 20;
/** Replies to AUTH (or to commands sent without it) that no reconnect can change. */
const AUTH_REFUSED =
  /^(WRONGPASS|NOAUTH|NOPERM)\b|^ERR (invalid (username-)?password|AUTH\b|Client sent AUTH)/;
/**
 * Longest `timeoutMs`: a decision may wait this long for the store, and a call that slow is an
 * outage the fail policy should answer, not a wait.
 */
const MAX_TIMEOUT_MS = 60_000;
const SERVER_CHECK_ATTEMPTS = 3;

function isCluster(client: Client): client is Cluster {
  return 'nodes' in client && typeof client.nodes === 'function';
}

function isSafe(client: Client): boolean {
  type Flags = {
    enableOfflineQueue?: boolean;
    autoResendUnfulfilledCommands?: boolean;
    commandTimeout?: number;
  };
  if (isCluster(client)) {
    const node = client.options.redisOptions as Flags | undefined;
    return (
      client.options.enableOfflineQueue === false &&
      client.options.retryDelayOnFailover === 0 &&
      client.options.enableReadyCheck === false &&
      node?.autoResendUnfulfilledCommands === false &&
      !node.commandTimeout
    );
  }
  const o = client.options as Flags;
  return o.enableOfflineQueue === false && o.autoResendUnfulfilledCommands === false && !o.commandTimeout;
}

/**
 * The client the store runs on: the user's own when it already has the safe settings, otherwise a
 * duplicate with them (which the store owns and closes). The user's client is never reconfigured.
 */
function safeClient(client: Client): { client: Client; owned: boolean } {
  if (isSafe(client)) return { client, owned: false };
  // A duplicate connects now even when the client was made with `lazyConnect`: it would otherwise
  // wait for a first command, which the store never sends before a connection is up.
  const duplicate = isCluster(client)
    ? client.duplicate([], {
        ...SAFE_CLUSTER,
        lazyConnect: false,
        clusterRetryStrategy: reconnectDelay,
        redisOptions: { ...client.options.redisOptions, ...SAFE_NODE },
      })
    : client.duplicate({ ...SAFE_NODE, lazyConnect: false, retryStrategy: reconnectDelay });
  // Connection errors surface as rejected calls; an unhandled 'error' event would crash the process.
  duplicate.on('error', () => {});
  return { client: duplicate, owned: true };
}

/**
 * `promise`, or a rejection after `ms`: for the store's own commands outside batches (the
 * connection has no command timeout, see `SAFE_NODE`).
 */
function within<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = deadline(ms, () => reject(new StoreTimeoutError(ms)));
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

function isNoScript(err: unknown): boolean {
  return err instanceof Error && err.message.startsWith('NOSCRIPT');
}

/** ioredis refusing to send because the connection is not ready: the command certainly did not run. */
function notSent(err: unknown): boolean {
  return err instanceof Error && /enableOfflineQueue options is false/.test(err.message);
}

/**
 * Redis replies refusing a write it certainly did not make: a script's first write is refused when
 * memory is full under `noeviction` (OOM), on a read-only replica (READONLY), after a failed save
 * with `stop-writes-on-bgsave-error` (MISCONF) or without the replicas `min-replicas-to-write` asks
 * for (NOREPLICAS), and only its first: once a script has written, Redis lets it finish. So a batch
 * operation failing so wrote nothing, and nor did those before it in the batch.
 */
const WRITE_REFUSALS = ['OOM', 'READONLY', 'MISCONF', 'NOREPLICAS'];
const REFUSED_WRITE = new RegExp(`^(${WRITE_REFUSALS.join('|')}) `);
/** Replies refusing a whole command before it runs: the refused writes and these. */
const REFUSED_COMMAND = new RegExp(
  `^(${[...WRITE_REFUSALS, 'LOADING', 'BUSY', 'MASTERDOWN', 'NOAUTH', 'NOPERM'].join('|')}) `,
);

/** A call Redis refused without running it: nothing it would have taken or given back is lost. */
function refused(reply: string, cause?: unknown): StoreUnavailableError {
  return new StoreUnavailableError(`Redis refused the call without running it: ${reply}`, cause, true);
}

/**
 * Eviction policies under which Redis may drop limiter keys when memory is full, which silently
 * resets buckets to full. Every limiter key carries a TTL, so `volatile-*` policies can pick them too.
 */
function evicts(policy: string): boolean {
  return policy.startsWith('allkeys-') || policy.startsWith('volatile-');
}

/**
 * Shared state in Redis or Redis Cluster. Each operation is one Lua script from `lua/`, run with
 * EVALSHA; when Redis answers NOSCRIPT (restart, failover, SCRIPT FLUSH) the script is sent once
 * with EVAL, which also caches it again. A call never waits in a queue while Redis is down.
 */
export class RedisStore<C extends RedisClient = RedisClient> implements Store {
  readonly #client: Client;
  readonly #owned: boolean;
  readonly #timeoutMs: number;
  readonly #now: (() => number) | undefined;
  readonly prefix: string;
  readonly #cluster: boolean;
  readonly #slotGroups: number;
  readonly #batcher: Batcher;
  #everReady: boolean;
  #closed = false;
  /** The last loading of the batch script (`#loadScript`); settles, never rejects. */
  #scriptLoaded: Promise<void> | undefined;
  /**
   * Each batch in flight: what rejects it, and the node it went to (`host:port`, '' on a single
   * Redis). See `#dropInFlight`.
   */
  readonly #inFlight = new Map<(err: StoreError) => void, string>();
  /** Removes the store's listeners from its connections (`close()`). */
  readonly #listeners: (() => void)[] = [];

  constructor(options: RedisStoreOptions<C>) {
    if (!options || typeof options !== 'object' || !isRedisClient(options.client)) {
      throw new ConfigError('client', 'expected an ioredis Redis or Cluster instance');
    }
    knownOptions(options, STORE_OPTIONS);
    noNullOptions(options);
    const timeoutMs = options.timeoutMs ?? 50;
    if (typeof timeoutMs !== 'number' || !(timeoutMs > 0 && timeoutMs <= MAX_TIMEOUT_MS)) {
      throw new ConfigError(
        'timeoutMs',
        `expected a number of milliseconds above 0 and at most ${MAX_TIMEOUT_MS}, got ${shown(timeoutMs)}`,
      );
    }
    const prefix = options.prefix ?? 'tl:';
    if (typeof prefix !== 'string' || /[{}]/.test(prefix)) {
      throw new ConfigError('prefix', 'expected a string without `{` or `}` (they would break the hash tag)');
    }
    clockOption(options.now);
    if (options.onWarning !== undefined && typeof options.onWarning !== 'function') {
      throw new ConfigError('onWarning', 'expected a function taking a message');
    }
    const slotGroups = countOption(options.slotGroups ?? 128, 'slotGroups', 16384);
    const batch = batchOptions(options.batch);
    // Typed as ioredis 5 inside: the members used here are the same in every accepted client.
    const { client, owned } = safeClient(options.client as unknown as Client);
    this.#client = client;
    this.#owned = owned;
    this.#timeoutMs = timeoutMs;
    this.#now = options.now;
    this.prefix = prefix;
    this.#cluster = isCluster(client);
    this.#slotGroups = slotGroups;
    this.#everReady = client.status === 'ready';
    this.#batcher = new Batcher({
      send: (items) => this.#send(items),
      groupOf: (key) => (this.#cluster ? String(keySlot(this.#sent(key))) : ''),
      laneOf: (key) => this.#nodeOf(this.#sent(key)),
      // Before the first connection is up, calls wait for it (within their timeout); after that a
      // lost connection fails calls at once, so the breaker and fail policies take over.
      canSend: () => this.#everReady,
      timeoutMs,
      maxItems: batch.maxItems,
      maxWaitMs: batch.maxWaitMs,
      maxInFlight: batch.maxInFlight,
    });
    this.#listen(client, 'ready', () => {
      this.#everReady = true;
      void this.#loadScript();
      this.#batcher.ready();
    });
    this.#listen(client, 'close', () => this.#dropInFlight(undefined));
    if (isCluster(client)) {
      const watch = (node: Redis) =>
        this.#listen(node, 'close', () => this.#dropInFlight(`${node.options.host}:${node.options.port}`));
      for (const node of client.nodes('all')) watch(node);
      this.#listen(client, '+node', watch);
    }
    // A client made with `lazyConnect` connects on its first command, and the store sends none
    // before a connection is up: without this, `ready()` would wait forever and every call time out.
    if (client.status === 'wait') client.connect().catch(() => {});
    const warn = options.onWarning ?? console.warn;
    if (client.status === 'ready') {
      void this.#loadScript();
      void this.#checkServer(warn);
    } else client.once('ready', () => void this.#checkServer(warn));
  }

  /**
   * Listens on a connection until `close()`: a client the store does not own may outlive it, and
   * may be shared by many stores.
   */
  #listen<A extends unknown[]>(emitter: Client, event: string, listener: (...args: A) => void): void {
    const fn = listener as (...args: unknown[]) => void;
    emitter.on(event, fn);
    this.#listeners.push(() => emitter.off(event, fn));
  }

  /** The connection the store runs on: a safe duplicate of the client passed in, unless that one was safe. */
  get client(): C {
    return this.#client as unknown as C;
  }

  /** The connections that take writes: the client itself, or a Cluster's masters. */
  #masters(): Redis[] {
    return isCluster(this.#client) ? this.#client.nodes('master') : [this.#client];
  }

  /**
   * Loads the batch script on every master at each (re)connect, so that the first call runs its
   * EVALSHA at once rather than paying a NOSCRIPT and an EVAL of the whole script: tens of ms on a
   * busy machine, past a call's timeout, so a process's first decision fell back. Best effort: a
   * call answered NOSCRIPT still sends the script itself.
   */
  #loadScript(): Promise<void> {
    const { source } = luaScript('batch');
    const masters = this.#masters();
    this.#scriptLoaded = within(
      Promise.all(masters.map((node) => node.script('LOAD', source))),
      RECONNECT_MAX_MS,
    ).then(
      () => {},
      () => {},
    );
    return this.#scriptLoaded;
  }

  /**
   * Warns when any master may evict limiter keys, or when the store is connected to a read-only
   * replica (every script writes, so each call would fail and fall back, with nothing else to say
   * why). Best effort: a few attempts (the store's command timeout is tight and the process may be
   * busy starting), then silence.
   */
  async #checkServer(warn: (message: string) => void): Promise<void> {
    for (let attempt = 1; attempt <= SERVER_CHECK_ATTEMPTS; attempt++) {
      if (this.#closed) return;
      const masters = this.#masters();
      const infos = await within(
        Promise.all(
          masters.map(async (node) => `${await node.info('memory')}\n${await node.info('replication')}`),
        ),
        RECONNECT_MAX_MS,
      ).catch(() => undefined);
      if (infos === undefined) {
        await new Promise((resolve) => setTimeout(resolve, RECONNECT_MAX_MS).unref());
        continue;
      }
      const policies = infos.map((info) => /^maxmemory_policy:(\S+)/m.exec(info)?.[1]);
      const bad = policies.find((p): p is string => p !== undefined && evicts(p));
      if (bad !== undefined) {
        warn(
          `tokenlease: Redis maxmemory-policy is ${bad}: when memory is full Redis may evict limiter ` +
            'keys, which resets their buckets to full. Use maxmemory-policy noeviction (a full Redis ' +
            "then fails calls, and each rule's fail policy applies) and size maxmemory as docs/operations.md says.",
        );
      }
      const replica = infos.find((info) => /^role:slave\b/m.test(info) && /^slave_read_only:1\b/m.test(info));
      if (replica !== undefined) {
        const host = /^master_host:(\S+)/m.exec(replica)?.[1];
        const port = /^master_port:(\d+)/m.exec(replica)?.[1];
        warn(
          `tokenlease: the store is connected to a read-only replica (of ${host}:${port}): every store ` +
            "call fails with READONLY and each rule's fail policy decides. Connect the store to the primary.",
        );
      }
      return;
    }
  }

  /**
   * Resolves once the connection the store uses is ready; for a Cluster, once every master has
   * answered too; and once the batch script is loaded (or that failed). Calls made before then may
   * fail (and fall back): no command waits in a queue, and a Cluster refuses commands to a node
   * whose connection is still being set up.
   */
  async ready(): Promise<void> {
    if (this.#client.status !== 'ready') await this.#connected();
    if (!isCluster(this.#client)) {
      await (this.#scriptLoaded ?? this.#loadScript());
      return;
    }
    // Setting up a node connection may take a while (the ping waits for it), so each attempt has
    // a deadline and a few are allowed.
    for (let attempt = 1; ; attempt++) {
      try {
        await within(
          Promise.all(this.#client.nodes('master').map((node) => node.ping())),
          Math.max(this.#timeoutMs, RECONNECT_MAX_MS),
        );
        // The load at the cluster's 'ready' may have found node connections still being set up.
        await this.#loadScript();
        return;
      } catch (err) {
        if (attempt === READY_ATTEMPTS) {
          throw new StoreError(`A Redis Cluster master did not answer: ${String(err)}`, err);
        }
        await new Promise((resolve) => setTimeout(resolve, RECONNECT_MAX_MS / 10));
      }
    }
  }

  /**
   * Resolves once the connection is ready. ioredis reconnects for ever, also after Redis refused its
   * password, so this rejects at the first refusal (retrying cannot fix it), when the connection
   * ends, or after as long as a Cluster master gets (`READY_ATTEMPTS` tries): a gateway awaiting
   * `ready()` at startup hears what is wrong instead of hanging. The connection keeps trying.
   */
  #connected(): Promise<void> {
    const client = this.#client;
    const waitMs = READY_ATTEMPTS * Math.max(this.#timeoutMs, RECONNECT_MAX_MS);
    return new Promise<void>((resolve, reject) => {
      let lastError = '';
      const settle = (error?: StoreError) => {
        clearTimeout(timer);
        client.off('ready', onReady);
        client.off('end', onEnd);
        client.off('error', onError);
        if (error) reject(error);
        else resolve();
      };
      const onReady = () => settle();
      const onEnd = () => settle(new StoreError('Redis connection ended before it was ready'));
      const onError = (err: unknown) => {
        lastError = err instanceof Error ? err.message : String(err);
        // A Cluster reports a slot map no node gave; the node's own reply is its `lastNodeError`.
        const nodeError = (err as { lastNodeError?: unknown } | undefined)?.lastNodeError;
        const reply = nodeError instanceof Error ? nodeError.message : lastError;
        if (nodeError instanceof Error) lastError = `${lastError} (${reply})`;
        if (AUTH_REFUSED.test(reply)) {
          settle(new StoreError(`Redis refused the connection's authentication: ${reply}`, err));
        }
      };
      const timer = setTimeout(() => {
        const why = lastError ? `: ${lastError}` : '';
        settle(new StoreError(`Redis connection not ready after ${waitMs} ms${why}`));
      }, waitMs).unref();
      client.once('ready', onReady);
      client.once('end', onEnd);
      client.on('error', onError);
    });
  }

  /** The Cluster node currently serving `key` per the client's slot map; one shard for a single Redis. */
  shardOf(key: string): string {
    if (!isCluster(this.#client)) return '';
    const slot = keySlot(this.redisKey(key));
    return this.#client.slots[slot]?.[0] ?? `slot ${slot}`;
  }

  run<S, Req, Res>(op: Operation<S, Req, Res>, key: string, req: Req, options?: RunOptions): Promise<Res> {
    if (this.#closed) return Promise.reject(new ClosedError('RedisStore'));
    const args = [...op.args(req), this.#now ? this.#now() : ''];
    return new Promise<unknown>((resolve, reject) => {
      this.#batcher.add({
        key: this.#fullKey(key),
        script: op.script,
        args,
        background: options?.background === true,
        timeoutMs: options?.timeoutMs,
        settle: (error, reply) => (error === undefined ? resolve(reply) : reject(error)),
      });
    }).then((reply) => op.parse(reply));
  }

  /** Round trips made so far: batches sent (each one EVALSHA, plus an EVAL after NOSCRIPT). */
  get roundTrips(): number {
    return this.#batcher.batches;
  }

  /**
   * The Redis key the state under `key` (a storage key, see `storageKey`) lives in, for operators
   * and tests. On a Cluster it starts with a hash tag naming one of `slotGroups` groups
   * (from the key's own tag, so one client's state stays in one slot): a batch may only touch one
   * slot, and grouping keys on purpose is what lets many keys share a batch.
   */
  redisKey(key: string): string {
    return this.#sent(this.#fullKey(key));
  }

  /**
   * The key ioredis sends for a full key: it puts a client's `keyPrefix` before every key, scripts'
   * keys included, and routes by that. A prefix holding a hash tag puts every key in its slot.
   */
  #sent(fullKey: string): string {
    return (this.#client.options.keyPrefix ?? '') + fullKey;
  }

  #fullKey(key: string): string {
    if (!this.#cluster) return this.prefix + key;
    return `${this.prefix}{g${keySlot(key) % this.#slotGroups}}${key}`;
  }

  /** Sends one batch as one EVALSHA of `lua/batch.lua`; NOSCRIPT means nothing ran, so EVAL is safe. */
  async #send(items: readonly BatchItem[]): Promise<readonly ItemReply[]> {
    const keys = items.map((i) => i.key);
    const argv: (string | number)[] = [];
    for (const item of items) argv.push(item.script, item.args.length, ...item.args);
    const script = luaScript('batch');
    let reply: unknown;
    let drop: ((err: StoreError) => void) | undefined;
    const dropped = new Promise<never>((_, reject) => {
      drop = reject;
    });
    this.#inFlight.set(drop!, this.#nodeOf(this.#sent(keys[0]!)));
    try {
      try {
        reply = await Promise.race([
          this.#client.evalsha(script.sha, keys.length, ...keys, ...argv),
          dropped,
        ]);
      } catch (err) {
        if (!isNoScript(err)) throw err;
        reply = await Promise.race([
          this.#client.eval(script.source, keys.length, ...keys, ...argv),
          dropped,
        ]);
      }
    } catch (err) {
      throw this.#failure(err);
    } finally {
      this.#inFlight.delete(drop!);
    }
    if (!Array.isArray(reply) || reply.length !== items.length) {
      throw new StoreError(`Unexpected batch reply: ${String(reply)}`);
    }
    return reply.map((r: unknown): ItemReply => {
      if (Array.isArray(r) && Number(r[0]) === 1) return { ok: true, reply: r[1] ?? null };
      const message = Array.isArray(r) ? String(r[1]) : String(r);
      if (REFUSED_WRITE.test(message)) return { ok: false, error: refused(message) };
      return { ok: false, error: new StoreError(`Redis call failed: ${message}`) };
    });
  }

  /**
   * A connection closed (`node`: a Cluster node's; undefined: the client's own): ioredis drops the
   * commands it had in flight without settling them (with `autoResendUnfulfilledCommands` off), so
   * their batches fail here, as possibly applied.
   */
  #dropInFlight(node: string | undefined): void {
    const error = new StoreError('Redis connection closed with the call in flight; it may have run');
    for (const [drop, sentTo] of this.#inFlight) {
      // A batch whose slot had no known node may have gone to any.
      if (node !== undefined && sentTo !== node && sentTo !== '') continue;
      drop(error);
      this.#inFlight.delete(drop);
    }
  }

  /** The node serving a key as sent (`#sent`) per the client's slot map; '' on a single Redis or when unknown. */
  #nodeOf(redisKey: string): string {
    return isCluster(this.#client) ? (this.#client.slots[keySlot(redisKey)]?.[0] ?? '') : '';
  }

  #failure(err: unknown): TokenleaseError {
    if (err instanceof TokenleaseError) return err;
    if (err instanceof Error && /timed out/i.test(err.message)) return new StoreTimeoutError(this.#timeoutMs);
    if (notSent(err)) {
      return new StoreUnavailableError(`Redis is not connected: ${(err as Error).message}`, err);
    }
    if (err instanceof Error && REFUSED_COMMAND.test(err.message)) return refused(err.message, err);
    return new StoreError(`Redis call failed: ${err instanceof Error ? err.message : String(err)}`, err);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#batcher.abort(new ClosedError('RedisStore'));
    for (const off of this.#listeners.splice(0)) off();
    if (this.#owned) this.#client.disconnect();
  }
}
