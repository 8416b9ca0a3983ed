import type { AcquireResult, SyncRequest, SyncResult } from '../../src/algorithms/tokenBucket.js';
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
 * bounds `bucketCharge` derives from this ledger.
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

/** What the token bucket under `key` was charged (tokens taken off its level), at least and at most. */
export interface Charge {
  readonly least: number;
  readonly most: number;
  /** Calls that may or may not have run, and the usage they carried. */
  readonly unknown: number;
  readonly unknownUsed: number;
}

/**
 * The charge the ledger's calls on one bucket explain, for a bucket that does not refill while the
 * test runs and never reaches its capacity again: an answered call charged exactly what its reply
 * says; a call never sent charged nothing; a call without an answer charged nothing or, at most,
 * everything it could have (its usage and the whole lease it asked for, none of its hand-back).
 */
export function bucketCharge(entries: readonly Entry[], key: string, since = 0): Charge {
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
      unknownUsed += e.script === 'token_bucket_sync' ? (e.req as SyncRequest).used : 0;
      least += Math.min(0, upTo.least);
      most += Math.max(0, upTo.most);
    }
  }
  return { least, most, unknown, unknownUsed };
}

/** A call's charge: exact when answered; its range if it ran, for a call without an answer. */
function effect(e: Entry): { exact: number; upTo: { least: number; most: number } } {
  switch (e.script) {
    case 'token_bucket_sync': {
      const req = e.req as SyncRequest;
      const granted = e.outcome === 'ok' ? (e.result as SyncResult).granted : 0;
      return {
        exact: req.used - req.returned + granted,
        upTo: { least: req.used - req.returned, most: req.used + req.want },
      };
    }
    case 'token_bucket_acquire': {
      const req = e.req as { want: number };
      const granted = e.outcome === 'ok' ? (e.result as AcquireResult).granted : 0;
      return { exact: granted, upTo: { least: 0, most: req.want } };
    }
    case 'token_bucket_release': {
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
