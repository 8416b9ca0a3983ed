import type { Cluster, Redis } from 'ioredis';
import { ClosedError, ConfigError, StoreError, StoreTimeoutError, TokenleaseError } from '../errors.js';
import { luaScript } from '../scripts.js';
import type { Operation, Store } from './store.js';

export interface RedisStoreOptions {
  /** An ioredis `Redis` or `Cluster`. See `safeClient` for the settings the store runs with. */
  client: Redis | Cluster;
  /**
   * Milliseconds a store call may take before it counts as failed. The limiter sits on every
   * request, so keep this in single-digit milliseconds for a local Redis.
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
}

type Client = Redis | Cluster;

/**
 * Settings without which a lease could be taken twice: a queued or re-sent script call would run
 * again after a reconnect, debiting tokens the caller already gave up on.
 */
const SAFE = { enableOfflineQueue: false, autoResendUnfulfilledCommands: false } as const;

function isCluster(client: Client): client is Cluster {
  return 'nodes' in client && typeof client.nodes === 'function';
}

function isSafe(client: Client): boolean {
  const o = client.options as { enableOfflineQueue?: boolean; autoResendUnfulfilledCommands?: boolean };
  if (isCluster(client)) {
    const node = client.options.redisOptions as typeof o | undefined;
    return o.enableOfflineQueue === false && node?.autoResendUnfulfilledCommands === false;
  }
  return o.enableOfflineQueue === false && o.autoResendUnfulfilledCommands === false;
}

/**
 * The client the store runs on: the user's own when it already has the safe settings, otherwise a
 * duplicate with them (which the store owns and closes). The user's client is never reconfigured.
 */
function safeClient(client: Client, timeoutMs: number): { client: Client; owned: boolean } {
  if (isSafe(client)) return { client, owned: false };
  const duplicate = isCluster(client)
    ? client.duplicate([], {
        enableOfflineQueue: false,
        redisOptions: { ...client.options.redisOptions, ...SAFE, commandTimeout: timeoutMs },
      })
    : client.duplicate({ ...SAFE, commandTimeout: timeoutMs });
  // Connection errors surface as rejected calls; an unhandled 'error' event would crash the process.
  duplicate.on('error', () => {});
  return { client: duplicate, owned: true };
}

function isNoScript(err: unknown): boolean {
  return err instanceof Error && err.message.startsWith('NOSCRIPT');
}

/**
 * Shared state in Redis or Redis Cluster. Each operation is one Lua script from `lua/`, run with
 * EVALSHA; when Redis answers NOSCRIPT (restart, failover, SCRIPT FLUSH) the script is sent once
 * with EVAL, which also caches it again. A call never waits in a queue while Redis is down.
 */
export class RedisStore implements Store {
  readonly #client: Client;
  readonly #owned: boolean;
  readonly #timeoutMs: number;
  readonly #now: (() => number) | undefined;
  readonly prefix: string;
  #closed = false;

  constructor(options: RedisStoreOptions) {
    if (!options || typeof options !== 'object' || !options.client) {
      throw new ConfigError('client', 'expected an ioredis Redis or Cluster instance');
    }
    const timeoutMs = options.timeoutMs ?? 50;
    if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) {
      throw new ConfigError(
        'timeoutMs',
        `expected a positive number of milliseconds, got ${String(timeoutMs)}`,
      );
    }
    const prefix = options.prefix ?? 'tl:';
    if (typeof prefix !== 'string' || /[{}]/.test(prefix)) {
      throw new ConfigError('prefix', 'expected a string without `{` or `}` (they would break the hash tag)');
    }
    if (options.now !== undefined && typeof options.now !== 'function') {
      throw new ConfigError('now', 'expected a function returning milliseconds');
    }
    const { client, owned } = safeClient(options.client, timeoutMs);
    this.#client = client;
    this.#owned = owned;
    this.#timeoutMs = timeoutMs;
    this.#now = options.now;
    this.prefix = prefix;
  }

  /** Resolves once the connection the store uses is ready (useful at startup and in tests). */
  async ready(): Promise<void> {
    if (this.#client.status === 'ready') return;
    await new Promise<void>((resolve, reject) => {
      const onReady = () => {
        this.#client.off('end', onEnd);
        resolve();
      };
      const onEnd = () => {
        this.#client.off('ready', onReady);
        reject(new StoreError('Redis connection ended before it was ready'));
      };
      this.#client.once('ready', onReady);
      this.#client.once('end', onEnd);
    });
  }

  async run<S, Req, Res>(op: Operation<S, Req, Res>, key: string, req: Req): Promise<Res> {
    if (this.#closed) throw new ClosedError('RedisStore');
    const args = [...op.args(req), this.#now ? this.#now() : ''];
    const reply = await this.#withTimeout(this.#evalScript(op.script, this.prefix + key, args));
    return op.parse(reply);
  }

  async #evalScript(name: string, key: string, args: readonly (string | number)[]): Promise<unknown> {
    const script = luaScript(name);
    try {
      return await this.#client.evalsha(script.sha, 1, key, ...args);
    } catch (err) {
      // NOSCRIPT means the script did not run, so sending it again cannot debit twice.
      if (isNoScript(err)) return this.#client.eval(script.source, 1, key, ...args);
      throw err;
    }
  }

  async #withTimeout<T>(call: Promise<T>): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new StoreTimeoutError(this.#timeoutMs)), this.#timeoutMs);
    });
    try {
      return await Promise.race([call, timeout]);
    } catch (err) {
      if (err instanceof TokenleaseError) throw err;
      if (err instanceof Error && /timed out/i.test(err.message))
        throw new StoreTimeoutError(this.#timeoutMs);
      throw new StoreError(`Redis call failed: ${err instanceof Error ? err.message : String(err)}`, err);
    } finally {
      clearTimeout(timer);
      // The losing promise may still reject later; it must not surface as an unhandled rejection.
      call.catch(() => {});
    }
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#owned) this.#client.disconnect();
  }
}
