/**
 * Runs `onTimeout` once `ms` have passed, but only after the event loop has read what arrived in
 * the meantime. Node runs due timers before the poll phase that reads sockets, so after a stall
 * longer than `ms` (a long GC pause, synchronous work in the gateway) a reply already received
 * would lose to its own timer, and a call Redis answered in time would count as timed out (and
 * three of them open the breaker). Deferring to the check phase of the same loop turn lets the
 * poll phase settle it first. Cancel with `clearTimeout`; `onTimeout` must ignore a call already
 * settled, as it can still run when cancelled in between.
 */
export function deadline(ms: number, onTimeout: () => void): NodeJS.Timeout {
  return setTimeout(() => setImmediate(onTimeout), ms);
}
