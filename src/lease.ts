/**
 * The tokens one instance holds for one (policy, key): a short queue of lease segments.
 *
 * A segment granted while the shared bucket stood at `levelBefore` does not become usable all at
 * once: its i-th token exists only when the refill has brought the bucket from `levelBefore` up to
 * `i` (earlier grants are ahead of it in the queue). So a segment reaching into the future is spent
 * exactly as fast as the shared bucket refills, and the cluster as a whole never admits faster than
 * the exact bucket would — the lease only moves *who* gets a token, not *when* tokens exist.
 */
export interface Segment {
  /** Local time the grant was received (later than the store's decision: conservative). */
  readonly at: number;
  readonly levelBefore: number;
  readonly size: number;
  /** Refill rate of the shared bucket in tokens per ms. */
  readonly ratePerMs: number;
  used: number;
}

/** Tokens of `s` that exist at local time `now`. */
export function covered(s: Segment, now: number): number {
  if (s.levelBefore >= s.size) return s.size;
  return Math.min(s.size, Math.max(0, s.levelBefore + (now - s.at) * s.ratePerMs));
}

/** Tokens usable right now across all segments. */
export function available(segments: readonly Segment[], now: number): number {
  let sum = 0;
  for (const s of segments) sum += covered(s, now) - s.used;
  return sum;
}

/** Tokens held but not yet spent (usable now or later). */
export function unused(segments: readonly Segment[]): number {
  let sum = 0;
  for (const s of segments) sum += s.size - s.used;
  return sum;
}

// Floating-point slack when comparing token counts; far below any meaningful fraction of a token.
const EPSILON = 1e-9;

/** Spends `cost` usable tokens, oldest segment first. Returns false (spending nothing) if short. */
export function take(segments: Segment[], now: number, cost: number): boolean {
  if (available(segments, now) + EPSILON < cost) return false;
  let need = cost;
  for (const s of segments) {
    const part = Math.min(need, covered(s, now) - s.used);
    if (part > 0) {
      s.used += part;
      need -= part;
    }
    if (need <= EPSILON) break;
  }
  dropSpent(segments);
  return true;
}

/** Puts back tokens spent by a multi-rule check that was refused elsewhere. */
export function refund(segments: Segment[], now: number, tokens: number): void {
  segments.unshift({ at: now, levelBefore: tokens, size: tokens, ratePerMs: 1, used: 0 });
}

/** Milliseconds from `now` until `cost` tokens are usable, or Infinity if the held tokens never suffice. */
export function msUntilAvailable(segments: readonly Segment[], now: number, cost: number): number {
  if (available(segments, now) + EPSILON >= cost) return 0;
  if (unused(segments) + EPSILON < cost) return Number.POSITIVE_INFINITY;
  // Coverage is piecewise linear and non-decreasing in time: bisect up to the last full coverage.
  let lo = now;
  let hi = now;
  // Only segments still filling bound the search (a full one may not refill at all: rate 0).
  for (const s of segments) {
    if (s.levelBefore < s.size) hi = Math.max(hi, s.at + (s.size - s.levelBefore) / s.ratePerMs);
  }
  for (let i = 0; i < 40 && hi - lo > 0.01; i++) {
    const mid = (lo + hi) / 2;
    if (available(segments, mid) + EPSILON >= cost) hi = mid;
    else lo = mid;
  }
  return hi - now;
}

/** Local time at which every token of every segment exists. */
export function fullyCoveredAt(segments: readonly Segment[]): number {
  let t = Number.NEGATIVE_INFINITY;
  for (const s of segments) {
    // A segment whose tokens all exist needs no refill (a fixed window's rate is 0).
    t = Math.max(t, s.levelBefore >= s.size ? s.at : s.at + (s.size - s.levelBefore) / s.ratePerMs);
  }
  return t;
}

function dropSpent(segments: Segment[]): void {
  let write = 0;
  for (const s of segments) if (s.size - s.used > EPSILON) segments[write++] = s;
  // Writing the length when nothing was dropped costs a store on the hot path.
  if (write !== segments.length) segments.length = write;
}
