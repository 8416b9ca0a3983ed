/** A number with its sign always written (+0.25, -1.50), for drifts and excesses. */
export function signed(n: number, digits = 2): string {
  if (!Number.isFinite(n)) return n > 0 ? '+∞' : '-∞';
  const s = n.toFixed(digits);
  return n >= 0 ? `+${s}` : s;
}
