import { LRUCache } from 'lru-cache';
import { ConfigError, shown } from '../errors.js';
import { countOption } from '../options.js';
import type { DecisionEvent, Observer } from './events.js';

/**
 * Quota alerts: "client X has used 80 % / 90 % / 100 % of its limit", once each, so users can send an
 * e-mail or a webhook before the quota ends.
 *
 * A token bucket has no calendar window, so "once per window" is defined by hysteresis: a threshold
 * fires when a key's usage (`1 - remaining / limit` after a decision; 1 for a denial) first reaches
 * it, and re-arms only when usage falls below `threshold - rearmMargin` again — the bucket refilled.
 * The margin keeps a client hovering at 80 % from firing on every token.
 *
 * Each process judges from its own decisions (`remaining` is its best estimate of the cluster-wide
 * level), so with N gateway instances a key may fire up to N times per crossing: deduplicate by
 * (policy, key, threshold) downstream if that matters.
 */

export interface ThresholdEvent {
  readonly policy: string;
  readonly key: string;
  readonly route: string | undefined;
  /** The threshold reached, e.g. 0.8. */
  readonly threshold: number;
  /** Usage when it fired: `1 - remaining / limit`, or 1 for a denial. At least `threshold`. */
  readonly fraction: number;
  readonly remaining: number;
  readonly limit: number;
}

export interface QuotaAlertsOptions {
  /** Called synchronously, once per crossing of each threshold by each key: enqueue, don't block. */
  onThreshold: (event: ThresholdEvent) => void;
  /**
   * Usage fractions that fire, each in (0, 1].
   * @default [0.8, 0.9, 1]
   */
  thresholds?: readonly number[];
  /**
   * A fired threshold re-arms once usage is below `threshold - rearmMargin`.
   * @default 0.05
   */
  rearmMargin?: number;
  /**
   * Most keys remembered with a fired threshold; the least recently used is forgotten (and may fire again).
   * @default 100_000
   */
  maxKeys?: number;
}

/**
 * The pure step: which thresholds are fired (bit i for `thresholds[i]`, ascending) after a decision
 * at usage `used`, given those fired before. Newly set bits are the crossings to report.
 */
export function nextFired(
  fired: number,
  used: number,
  thresholds: readonly number[],
  margin: number,
): number {
  let next = fired;
  for (let i = 0; i < thresholds.length; i++) {
    const t = thresholds[i]!;
    const bit = 1 << i;
    if (used >= t) next |= bit;
    else if (used < t - margin) next &= ~bit;
  }
  return next;
}

function checkOptions(options: QuotaAlertsOptions): {
  thresholds: number[];
  margin: number;
  maxKeys: number;
} {
  if (typeof options !== 'object' || options === null) throw new ConfigError('options', 'expected an object');
  if (typeof options.onThreshold !== 'function') {
    throw new ConfigError(
      'onThreshold',
      'expected a function receiving { policy, key, threshold, fraction }',
    );
  }
  const raw = options.thresholds ?? [0.8, 0.9, 1];
  if (!Array.isArray(raw) || raw.length === 0 || raw.length > 30) {
    throw new ConfigError('thresholds', 'expected 1 to 30 fractions in (0, 1]');
  }
  raw.forEach((t, i) => {
    if (typeof t !== 'number' || !(t > 0 && t <= 1)) {
      throw new ConfigError(`thresholds[${i}]`, `expected a fraction in (0, 1], got ${shown(t)}`);
    }
  });
  const margin = options.rearmMargin ?? 0.05;
  if (typeof margin !== 'number' || !(margin >= 0 && margin < 1)) {
    throw new ConfigError('rearmMargin', `expected a number in [0, 1), got ${shown(margin)}`);
  }
  const maxKeys = countOption(options.maxKeys ?? 100_000, 'maxKeys');
  return { thresholds: [...new Set(raw)].sort((a, b) => a - b), margin, maxKeys };
}

/** An observer that calls `onThreshold` as keys reach 80 / 90 / 100 % of their limit (see above). */
export function quotaAlerts(options: QuotaAlertsOptions): Observer {
  const { thresholds, margin, maxKeys } = checkOptions(options);
  const { onThreshold } = options;
  const lowest = thresholds[0]!;
  // Only keys with a fired threshold are remembered: a key below every threshold has all armed.
  const fired = new LRUCache<string, number>({ max: maxKeys });

  return {
    decision(e: DecisionEvent): void {
      if (e.outcome === 'failed-open' || e.outcome === 'failed-closed') return; // usage unknown
      if (e.reason === 'cost-above-limit') return; // says nothing about usage
      // (limit - remaining) / limit rounds exactly onto fractions like 0.8 when limit is a round number.
      const used = e.outcome === 'allowed' ? (e.limit - e.remaining) / e.limit : 1;
      if (used < lowest && fired.size === 0) return;
      const id = `${e.policy.length}:${e.policy}${e.key}`;
      const before = fired.get(id) ?? 0;
      const after = nextFired(before, used, thresholds, margin);
      if (after === before) return;
      if (after === 0) fired.delete(id);
      else fired.set(id, after);
      const crossed = after & ~before;
      for (let i = 0; i < thresholds.length; i++) {
        if ((crossed & (1 << i)) === 0) continue;
        onThreshold({
          policy: e.policy,
          key: e.key,
          route: e.route,
          threshold: thresholds[i]!,
          fraction: used,
          remaining: e.remaining,
          limit: e.limit,
        });
      }
    },
  };
}
