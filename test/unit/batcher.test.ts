import { afterEach, describe, expect, it, vi } from 'vitest';
import { StoreOverloadError, StoreTimeoutError, StoreUnavailableError } from '../../src/errors.js';
import { Batcher, type BatcherOptions, type BatchItem, type ItemReply } from '../../src/stores/batcher.js';

afterEach(() => {
  vi.useRealTimers();
});

function batcher(options: Partial<BatcherOptions> & Pick<BatcherOptions, 'send'>) {
  return new Batcher({
    groupOf: () => '',
    laneOf: () => '',
    canSend: () => true,
    timeoutMs: 50,
    maxItems: 256,
    maxWaitMs: 2,
    maxInFlight: 16,
    ...options,
  });
}

/** Adds a call and returns how it settled. */
function call(b: Batcher, key: string, background = false, timeoutMs?: number) {
  return new Promise<{ error?: unknown; reply?: unknown }>((resolve) => {
    b.add({
      key,
      script: 'op',
      args: [],
      background,
      timeoutMs,
      settle: (error, reply) => resolve({ error, reply }),
    });
  });
}

/** Fake timers, and the monotonic clock the batcher reads with them. */
function fakeTime() {
  vi.useFakeTimers({
    toFake: ['setTimeout', 'clearTimeout', 'setImmediate', 'clearImmediate', 'performance'],
  });
}

/** A store that runs batches one after the other, each taking `ms`: one connection to a busy Redis. */
function serialStore(ms: number) {
  let freeAt = 0;
  return async (items: readonly BatchItem[]): Promise<ItemReply[]> => {
    freeAt = Math.max(performance.now(), freeAt) + ms;
    await new Promise((resolve) => setTimeout(resolve, freeAt - performance.now()));
    return echo(items);
  };
}

const echo = async (items: readonly BatchItem[]): Promise<ItemReply[]> =>
  items.map((i) => ({ ok: true, reply: i.key }));

describe('Batcher', () => {
  it('sends the calls of one event-loop turn as one batch, foreground first', async () => {
    const batches: string[][] = [];
    const b = batcher({
      send: async (items) => {
        batches.push(items.map((i) => i.key));
        return echo(items);
      },
    });
    const results = await Promise.all([call(b, 'bg', true), call(b, 'a'), call(b, 'b')]);
    expect(results.map((r) => r.reply)).toEqual(['bg', 'a', 'b']);
    expect(batches, 'one round trip; the background call rides along behind').toEqual([['a', 'b', 'bg']]);
    expect(b.batches).toBe(1);
  });

  it('a background call rides ahead of a later waiting call for its key, in the order they were made', async () => {
    const batches: string[][] = [];
    const b = batcher({
      send: async (items) => {
        batches.push(items.map((i) => `${i.key}:${i.background ? 'bg' : 'fg'}`));
        return echo(items);
      },
    });
    await Promise.all([call(b, 'other', true), call(b, 'k', true), call(b, 'a'), call(b, 'k')]);
    expect(batches, "k's refund runs before k's consume; other background work stays behind").toEqual([
      ['k:bg', 'a:fg', 'k:fg', 'other:bg'],
    ]);
  });

  it('cuts batches by group and by size', async () => {
    const batches: string[][] = [];
    const b = batcher({
      groupOf: (key) => key[0]!,
      laneOf: () => '',
      maxItems: 2,
      send: async (items) => {
        batches.push(items.map((i) => i.key));
        return echo(items);
      },
    });
    await Promise.all(['a1', 'b1', 'a2', 'a3'].map((k) => call(b, k)));
    expect(batches).toEqual([['a1', 'a2'], ['a3'], ['b1']]);
  });

  it('settles every call within the timeout from the moment it is made: sent ones as timed out, queued ones as never sent', async () => {
    fakeTime();
    let sent = 0;
    // A store that never answers, with room for one batch in flight.
    const b = batcher({
      maxInFlight: 1,
      maxItems: 1,
      send: () => {
        sent++;
        return new Promise(() => {});
      },
    });
    const first = call(b, 'a');
    const second = call(b, 'b');
    await vi.advanceTimersByTimeAsync(49);
    expect(sent, 'the second waits for a batch slot').toBe(1);
    // The timeout, its hop to the check phase (src/stores/deadline.ts) and the batch's second look
    // after a poll phase, which fake timers run 1 ms apart.
    await vi.advanceTimersByTimeAsync(3);
    expect((await first).error).toBeInstanceOf(StoreTimeoutError);
    const queued = (await second).error;
    expect(queued, 'never sent: certainly not applied').toBeInstanceOf(StoreUnavailableError);
    expect(String(queued)).toMatch(/not sent within 50 ms/);
  });

  it('holds calls made before the connection is ready, and sends them once it is', async () => {
    let ready = false;
    const b = batcher({ canSend: () => ready, send: echo });
    const pending = call(b, 'a');
    await new Promise((resolve) => setImmediate(resolve));
    ready = true;
    b.ready();
    expect((await pending).reply).toBe('a');
  });

  it('fails one item alone when the store says so, and all of a batch that failed whole', async () => {
    const b = batcher({
      send: async (items) =>
        items.length === 2
          ? [
              { ok: true, reply: 1 },
              { ok: false, error: new Error('bad item') },
            ]
          : Promise.reject(new Error('down')),
    });
    const [x, y] = await Promise.all([call(b, 'x'), call(b, 'y')]);
    expect(x.reply).toBe(1);
    expect(String(y.error)).toMatch(/bad item/);
    expect(String((await call(b, 'z')).error)).toMatch(/down/);
  });

  it('sends at most one call per key at a time: a second waits for the first to be answered', async () => {
    const batches: string[][] = [];
    const answers: (() => void)[] = [];
    const b = batcher({
      // Nothing here is about timeouts: a loaded machine must not time the calls out meanwhile.
      timeoutMs: 60_000,
      send: (items) => {
        batches.push(items.map((i) => i.key));
        return new Promise((resolve) =>
          answers.push(() => resolve(items.map((i) => ({ ok: true, reply: i.key })))),
        );
      },
    });
    const turn = () => new Promise((resolve) => setImmediate(resolve));
    const first = call(b, 'a');
    await turn();
    const second = call(b, 'a', true);
    const other = call(b, 'b');
    await new Promise((resolve) => setTimeout(resolve, 5));
    expect(batches, 'the second call for a waits; b goes').toEqual([['a'], ['b']]);
    answers[1]!();
    expect((await other).reply).toBe('b');
    answers[0]!();
    expect((await first).reply).toBe('a');
    // A background call waits up to maxWaitMs for company; on a loaded machine, longer.
    for (let i = 0; i < 200 && batches.length < 3; i++)
      await new Promise((resolve) => setTimeout(resolve, 5));
    expect(batches, 'answered: the waiting call goes').toEqual([['a'], ['b'], ['a']]);
    answers[2]!();
    expect((await second).reply).toBe('a');
  });

  it('after a call timed out unanswered, new calls for its key fail at once as never sent, until it is answered', async () => {
    fakeTime();
    const answers: (() => void)[] = [];
    let sent = 0;
    const b = batcher({
      send: (items) => {
        sent += items.length;
        return new Promise((resolve) =>
          answers.push(() => resolve(items.map((i) => ({ ok: true, reply: i.key })))),
        );
      },
    });
    const stuck = call(b, 'a');
    // The timeout, its hop to the check phase (src/stores/deadline.ts) and the second look.
    await vi.advanceTimersByTimeAsync(52);
    expect((await stuck).error, 'the paused call times out').toBeInstanceOf(StoreTimeoutError);
    const refused = await call(b, 'a');
    expect(refused.error, 'never sent: the fail policy answers at once').toBeInstanceOf(
      StoreUnavailableError,
    );
    expect(String(refused.error)).toMatch(/earlier call for this key timed out/);
    const other = call(b, 'b');
    await vi.advanceTimersByTimeAsync(1);
    expect(sent, 'other keys still go').toBe(2);
    answers[1]!();
    expect((await other).reply).toBe('b');
    answers[0]!(); // the pause lifts: Redis runs the old call and answers it
    await vi.advanceTimersByTimeAsync(0);
    const again = call(b, 'a');
    await vi.advanceTimersByTimeAsync(1);
    answers[2]!();
    expect((await again).reply, 'the key is usable again').toBe('a');
    expect(sent).toBe(3);
  });

  it('a batch behind others on a connection that keeps answering does not time out', async () => {
    fakeTime();
    // Four batches written at once to a Redis that needs 30 ms for each: the last is answered at
    // 120 ms, 70 past its write plus the timeout, yet the connection was never quiet for 50 ms.
    const b = batcher({ maxItems: 1, maxInFlight: 4, send: serialStore(30) });
    const calls = ['a', 'b', 'c', 'd'].map((k) => call(b, k));
    await vi.advanceTimersByTimeAsync(130);
    expect((await Promise.all(calls)).map((r) => r.reply ?? r.error)).toEqual(['a', 'b', 'c', 'd']);
  });

  it('a call still queued when its time is up fails as overloaded while the store answers', async () => {
    fakeTime();
    const b = batcher({ maxItems: 1, maxInFlight: 1, send: serialStore(30) });
    const calls = ['a', 'b', 'c'].map((k) => call(b, k));
    await vi.advanceTimersByTimeAsync(70);
    const [a, bb, c] = await Promise.all(calls);
    expect([a!.reply, bb!.reply]).toEqual(['a', 'b']);
    expect(c!.error, 'never sent, and no sign of a failing store').toBeInstanceOf(StoreOverloadError);
    expect(c!.error, 'so the fail policy answers it').toBeInstanceOf(StoreUnavailableError);
  });

  it("a call's own timeout holds even while the connection answers", async () => {
    fakeTime();
    const b = batcher({ maxItems: 1, maxInFlight: 2, send: serialStore(30) });
    const first = call(b, 'a');
    const closing = call(b, 'b', false, 20);
    await vi.advanceTimersByTimeAsync(25);
    expect((await closing).error).toBeInstanceOf(StoreTimeoutError);
    await vi.advanceTimersByTimeAsync(10);
    expect((await first).reply).toBe('a');
  });

  it('a connection that stopped answering does not take the batch slots of the others (one Cluster node paused)', async () => {
    fakeTime();
    // Keys 'x…' live on a node that holds every call (paused); keys 'y…' on one that answers.
    const b = batcher({
      maxItems: 1,
      maxInFlight: 2,
      groupOf: (key) => key,
      laneOf: (key) => key[0]!,
      send: (items) => (items[0]!.key.startsWith('x') ? new Promise(() => {}) : echo(items)),
    });
    const held = ['x1', 'x2', 'x3'].map((k) => call(b, k));
    await vi.advanceTimersByTimeAsync(1);
    const other = call(b, 'y1');
    await vi.advanceTimersByTimeAsync(5);
    expect((await other).reply, 'the answering node is not queued behind the paused one').toBe('y1');
    await vi.advanceTimersByTimeAsync(60);
    const [x1, x2, x3] = await Promise.all(held.map(async (h) => (await h).error));
    expect(x1).toBeInstanceOf(StoreTimeoutError);
    expect(x2).toBeInstanceOf(StoreTimeoutError);
    expect(x3, 'queued behind its own node: never sent').toBeInstanceOf(StoreUnavailableError);
  });
});
