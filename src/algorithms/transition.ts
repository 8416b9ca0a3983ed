/** The result of an operation: the next state (undefined = delete) and its time to live. */
export interface Transition<S, R> {
  readonly state: S | undefined;
  readonly ttlMs: number;
  readonly result: R;
}
