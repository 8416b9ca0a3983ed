import { ConfigError } from '../errors.js';
import type { DecisionEvent, Observer } from './events.js';

/** One structured log record: the decision event itself (key, route, cost, remaining, reason, …). */
export type DecisionLogEntry = DecisionEvent;

export interface DecisionLogOptions {
  /** Receives each logged decision, e.g. `(e) => logger.warn(e, 'rate limited')`. Called synchronously. */
  log: (entry: DecisionLogEntry) => void;
  /**
   * `'denied'`: every decision that did not plainly allow (denials, shadow denials, fail-policy
   * answers); `'all'`: every decision (verbose: one record per rule per request).
   * @default 'denied'
   */
  level?: 'denied' | 'all';
}

/** A structured log hook: hands `log` one record per logged decision. */
export function decisionLog(options: DecisionLogOptions): Observer {
  if (typeof options !== 'object' || options === null) throw new ConfigError('options', 'expected an object');
  const { log, level = 'denied' } = options;
  if (typeof log !== 'function') throw new ConfigError('log', 'expected a function receiving a log record');
  if (level !== 'denied' && level !== 'all') {
    throw new ConfigError('level', `expected 'denied' or 'all', got ${JSON.stringify(level)}`);
  }
  const all = level === 'all';
  return {
    decision(e: DecisionEvent): void {
      if (all || e.outcome !== 'allowed') log(e);
    },
  };
}
