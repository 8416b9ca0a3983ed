/**
 * Virtual time and a discrete-event loop. Events run in time order; after each one the microtask
 * queue is drained, so promise chains inside the limiter (store replies, single-flight waiters)
 * settle at the virtual instant they belong to. An event may return a promise (a real Redis call):
 * virtual time stands still until it settles. No wall-clock sleeps anywhere.
 */
export type SimEvent = () => unknown;

export class VirtualClock {
  #now = 0;
  #seq = 0;
  // Binary heap of [time, seq, fn]; seq keeps events at the same instant in scheduling order.
  readonly #heap: [number, number, SimEvent][] = [];

  readonly now = (): number => this.#now;

  at(time: number, fn: SimEvent): void {
    const item: [number, number, SimEvent] = [Math.max(time, this.#now), this.#seq++, fn];
    const h = this.#heap;
    h.push(item);
    let i = h.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!less(h[i]!, h[parent]!)) break;
      [h[i], h[parent]] = [h[parent]!, h[i]!];
      i = parent;
    }
  }

  after(delayMs: number, fn: SimEvent): void {
    this.at(this.#now + delayMs, fn);
  }

  /** Runs events until none are left before `until`; leaves the clock at `until`. */
  async run(until: number, onProgress?: (now: number) => void): Promise<void> {
    let n = 0;
    while (this.#heap.length > 0 && this.#heap[0]![0] <= until) {
      const [time, , fn] = this.#pop();
      this.#now = time;
      const pending = fn();
      if (pending instanceof Promise) await pending;
      await drainMicrotasks();
      if (onProgress && ++n % 4096 === 0) onProgress(this.#now);
    }
    this.#now = Math.max(this.#now, until);
  }

  #pop(): [number, number, SimEvent] {
    const h = this.#heap;
    const top = h[0]!;
    const last = h.pop()!;
    if (h.length > 0) {
      h[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < h.length && less(h[l]!, h[m]!)) m = l;
        if (r < h.length && less(h[r]!, h[m]!)) m = r;
        if (m === i) break;
        [h[i], h[m]] = [h[m]!, h[i]!];
        i = m;
      }
    }
    return top;
  }
}

function less(a: [number, number, unknown], b: [number, number, unknown]): boolean {
  return a[0] < b[0] || (a[0] === b[0] && a[1] < b[1]);
}

/** setImmediate runs only after the whole microtask queue has drained. */
function drainMicrotasks(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
