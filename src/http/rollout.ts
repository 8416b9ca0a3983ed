import { createHash } from 'node:crypto';

/**
 * Where a client falls in a gradual rollout: a number in [0, 100) from a hash of its key, so the
 * same client is always on the same side, and raising the percentage only ever adds clients
 * (those enforced at 10 % stay enforced at 20 %).
 */
export function rolloutPosition(clientKey: string): number {
  const digest = createHash('sha256').update(clientKey).digest();
  return (digest.readUInt32BE(0) / 2 ** 32) * 100;
}

/** Whether a rule refuses (rather than only reports) for this client. */
export function isEnforced(rule: { shadow: boolean; enforce: number }, clientKey: string): boolean {
  if (rule.shadow || rule.enforce <= 0) return false;
  return rule.enforce >= 100 || rolloutPosition(clientKey) < rule.enforce;
}
