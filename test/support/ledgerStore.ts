import type { SyncRequest } from '../../src/algorithms/tokenBucket.js';
import type { WindowSyncRequest, WindowSyncResult } from '../../src/algorithms/window.js';
import { StoreUnavailableError } from '../../src/errors.js';
import type { Operation, RunOptions, Store } from '../../src/stores/store.js';

/** How a call ended: answered, certainly not run (never sent), or unknown (sent, no answer). */
export type Outcome = 'pending' | 'ok' | 'unsent' | 'unknown';

export interface Entry {
  readonly script: string;
  readonly key: string;
  readonly req: unknown;
  /** `Date.now()` when the call was made. */
  readonly at: number;
  outcome: Outcome;
  result?: unknown;
}

/**
 * A pass-through in front of a real store that writes down every call and how it ended, so a test
 * can tell what the store may have applied from what it certainly did: a store that applied a call
 * twice, or applied one its caller was told had never been sent, shows up as a count outside the
 * bounds `callsCharge` derives from this ledger.
 */
export class LedgerStore implements Store {
  readonly entries: Entry[] = [];

  constructor(readonly inner: Store) {}

  run<S, Req, Res>(op: Operation<S, Req, Res>, key: string, req: Req, options?: RunOptions): Promise<Res> {
    const entry: Entry = { script: op.script, key, req, at: Date.now(), outcome: 'pending' };
    this.entries.push(entry);
    return this.inner.run(op, key, req, options).then(
      (result) => {
        entry.outcome = 'ok';
        entry.result = result;
        return result;
      },
      (err: unknown) => {
        entry.outcome = err instanceof StoreUnavailableError ? 'unsent' : 'unknown';
        throw err;
      },
    );
  }

  shardOf(key: string): string {
    return this.inner.shardOf?.(key) ?? '';
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}

/**
 * What the state under `key` was charged, at least and at most: tokens taken off a bucket's level,
 * tokens counted in a window.
 */
export interface Charge {
  readonly least: number;
  readonly most: number;
  /** Calls that may or may not have run, and the usage they carried. */
  readonly unknown: number;
  readonly unknownUsed: number;
}

/**
 * The charge the ledger's calls on one key explain, for a bucket that does not refill while the
 * test runs and never reaches its capacity again, or for a window that does not end while the test
 * runs (every call counts in it) and whose count hand-backs never take below zero: an answered call
 * charged exactly what its reply says; a call never sent charged nothing; a call without an answer
 * charged nothing or, at most, everything it could have (its usage and the whole lease it asked
 * for, none of its hand-back). Where the store lost its state at `since`, hand-backs of tokens
 * granted before may hit the capacity or zero: `handBackSlack` says how much that can add.
 */
export function callsCharge(entries: readonly Entry[], key: string, since = 0): Charge {
  let least = 0;
  let most = 0;
  let unknown = 0;
  let unknownUsed = 0;
  for (const e of entries) {
    if (e.key !== key || e.at < since) continue;
    if (e.outcome === 'pending') throw new Error(`a ${e.script} call on ${key} never settled`);
    if (e.outcome === 'unsent') continue;
    const { exact, upTo } = effect(e);
    if (e.outcome === 'ok') {
      least += exact;
      most += exact;
    } else {
      unknown++;
      unknownUsed += isSync(e.script) ? (e.req as { used: number }).used : 0;
      least += Math.min(0, upTo.least);
      most += Math.max(0, upTo.most);
    }
  }
  return { least, most, unknown, unknownUsed };
}

/**
 * Most that hand-backs since `since` of tokens granted before it can add to a charge `callsCharge`
 * derives from the calls since `since`, on a store that lost its state then: each instance (one
 * ledger) hands back at most what was granted to it before.
 */
export function handBackSlack(ledgers: readonly LedgerStore[], key: string, since: number): number {
  let slack = 0;
  for (const ledger of ledgers) {
    let grantedBefore = 0;
    let returnedSince = 0;
    for (const e of ledger.entries) {
      if (e.key !== key) continue;
      if (e.at < since && e.outcome === 'ok') grantedBefore += granted(e);
      if (e.at >= since && e.outcome !== 'unsent') returnedSince += returned(e);
    }
    slack += Math.min(grantedBefore, returnedSince);
  }
  return slack;
}

const isSync = (script: string) => script.endsWith('_sync');

/** Tokens an answered call granted as a lease (its allowance aside). */
function granted(e: Entry): number {
  const result = e.result as { granted?: number } | number | null;
  return typeof result === 'object' && result !== null ? (result.granted ?? 0) : 0;
}

/** Tokens a call hands back. */
function returned(e: Entry): number {
  const req = e.req as { returned?: number; tokens?: number };
  if (isSync(e.script)) return req.returned ?? 0;
  return e.script.endsWith('_release') ? (req.tokens ?? 0) : 0;
}

/** A call's charge: exact when answered; its range if it ran, for a call without an answer. */
function effect(e: Entry): { exact: number; upTo: { least: number; most: number } } {
  switch (e.script) {
    case 'token_bucket_sync': {
      const req = e.req as SyncRequest;
      return {
        exact: req.used - req.returned + granted(e),
        upTo: { least: req.used - req.returned, most: req.used + req.want },
      };
    }
    case 'fixed_window_sync':
    case 'sliding_window_sync': {
      // Usage and hand-backs settle into the window they name, which is the one every call
      // counts in unless it is a first call's (nothing to settle yet).
      const req = e.req as WindowSyncRequest;
      const settles = e.outcome !== 'ok' || req.window === (e.result as WindowSyncResult).window;
      const report = settles ? req.used - req.returned : 0;
      return {
        exact: report + granted(e),
        upTo: { least: -req.returned, most: req.used + req.want },
      };
    }
    case 'token_bucket_acquire':
    case 'fixed_window_acquire':
    case 'sliding_window_acquire': {
      const req = e.req as { want: number };
      return { exact: granted(e), upTo: { least: 0, most: req.want } };
    }
    case 'token_bucket_release':
    case 'fixed_window_release':
    case 'sliding_window_release': {
      const { tokens } = e.req as { tokens: number };
      return { exact: -tokens, upTo: { least: -tokens, most: 0 } };
    }
    case 'token_bucket_debit': {
      const { tokens } = e.req as { tokens: number };
      const debited = e.outcome === 'ok' ? (e.result as number) : 0;
      return { exact: debited, upTo: { least: 0, most: tokens } };
    }
    default:
      throw new Error(`no charge known for ${e.script}`);
  }
}
