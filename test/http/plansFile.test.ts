import { closeSync, mkdtempSync, openSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Plans, PlansError } from '../../src/http/index.js';
import { ConfigError, Limiter } from '../../src/index.js';

let cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const fn of cleanup.reverse()) await fn();
  cleanup = [];
});

function tempFile(text: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'tokenlease-plans-'));
  cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
  const path = join(dir, 'plans.yaml');
  writeFileSync(path, text);
  return path;
}

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A plans file with `n` API keys (the big part of a real one). */
function plansText(n: number, rate = 5): string {
  let text = `plans:\n  free:\n    rules:\n      per-key: { rate: ${rate}, period: 1s }\nkeys:\n`;
  for (let i = 0; i < n; i++) text += `  k_${i}: free\n`;
  return text;
}

describe('the plans file (issue 13 item 12)', () => {
  it('fromFile on a YAML alias bomb throws PlansError, not a bare ReferenceError', () => {
    const bomb = [
      'a: &a ["x","x","x","x","x","x","x","x","x"]',
      'b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]',
      'c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]',
      'd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]',
      'e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]',
      'rules: { r: { rate: 1 } }',
      'deny: *e',
      '',
    ].join('\n');
    const path = tempFile(bomb);
    let caught: unknown;
    try {
      Plans.fromFile(path);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(PlansError);
    expect((caught as PlansError).code).toBe('ERR_TOKENLEASE_PLANS');
    expect((caught as PlansError).message).toMatch(/plans\.yaml: .*alias/i);
  });

  it('still reports a duplicated key among many with its line', () => {
    const text = `${plansText(5000)}  k_17: free\n`;
    expect(() => Plans.parse(text, 'plans.yaml')).toThrow(
      'plans.yaml:5006:3: Map keys must be unique (DUPLICATE_KEY)',
    );
  });

  it('keys with one string form are duplicates (`1` and "1"), and `__proto__` is just a key', () => {
    expect(() => Plans.parse(`${plansText(1)}  1: free\n  "1": free\n`, 'plans.yaml')).toThrow(
      'plans.yaml:8:3: Map keys must be unique (DUPLICATE_KEY)',
    );
    const plans = Plans.parse(`${plansText(1)}  __proto__: free\n  12345: free\n`);
    expect([...plans.ruleSet().keys.keys()]).toEqual(['k_0', '__proto__', '12345']);
  });

  it('a file caught half-written in place never goes live truncated; the whole one does', async () => {
    const full = plansText(2000, 7);
    const path = tempFile(plansText(2000, 5));
    const plans = Plans.fromFile(path);
    const limiter = new Limiter({ policies: plans.policies, sweepIntervalMs: 0 });
    cleanup.push(
      () => limiter.close(),
      () => plans.close(),
    );
    const live: number[] = [];
    const errors: PlansError[] = [];
    plans.watch({
      limiter,
      debounceMs: 100,
      onReload: () => live.push(plans.ruleSet().keys.size),
      onError: (err) => errors.push(err),
    });
    // An in-place write in two pieces, cut at a line: the first piece alone is a valid file with
    // fewer keys, and it sits on disk for longer than the debounce (not longer than two: a writer
    // that stalls longer can still publish a truncated file; writing by rename is always safe).
    const cut = full.indexOf('\n', full.length / 2) + 1;
    const fd = openSync(path, 'w');
    writeSync(fd, full.slice(0, cut));
    await delay(150);
    writeSync(fd, full.slice(cut));
    closeSync(fd);
    for (let i = 0; i < 100 && live.length === 0; i++) await delay(20);
    await delay(200); // anything else it would still apply
    expect(live, 'key counts of every config that went live').toEqual([2000]);
    expect(limiter.describe('free/per-key').limit).toBe(7);
    expect(errors, 'nothing to report: the truncated file was never applied').toEqual([]);
  });

  it('keeps the previous plans and reports it when the file vanishes', async () => {
    const path = tempFile(plansText(10));
    const plans = Plans.fromFile(path);
    const limiter = new Limiter({ policies: plans.policies, sweepIntervalMs: 0 });
    cleanup.push(
      () => limiter.close(),
      () => plans.close(),
    );
    const errors: PlansError[] = [];
    plans.watch({ limiter, debounceMs: 10, onError: (err) => errors.push(err) });
    rmSync(path);
    for (let i = 0; i < 100 && errors.length === 0; i++) await delay(10);
    expect(errors[0]?.message).toMatch(/cannot read the plans file/);
    expect(plans.ruleSet().keys.size).toBe(10);
  });
});

/** What `plans.watch({ limiter, ...options })` throws on a fresh plans file. */
function watchError(options: object): unknown {
  const plans = Plans.fromFile(tempFile(plansText(1)));
  const limiter = new Limiter({ policies: plans.policies, sweepIntervalMs: 0 });
  cleanup.push(
    () => limiter.close(),
    () => plans.close(),
  );
  try {
    plans.watch({ limiter, ...options });
  } catch (err) {
    return err;
  }
  return undefined;
}

describe('watch options are bounded like durations', () => {
  it.each([
    [{ debounceMs: -1 }, 'debounceMs'],
    [{ debounceMs: 2 ** 31 }, 'debounceMs'],
    [{ pollIntervalMs: 0.5 }, 'pollIntervalMs'],
    [{ pollIntervalMs: 1e13 }, 'pollIntervalMs'],
  ])('%j is refused naming %s and the range', (options, field) => {
    const caught = watchError(options);
    expect((caught as { field?: string }).field).toBe(field);
    expect(String(caught)).toMatch(/from \d+ to 2147483647/);
  });

  // These were accepted: a string or BigInt delay reached setTimeout or watchFile (a TypeError from
  // Node, or '10' read as 10), a callback that is not a function threw on the first reload, and a
  // misspelt option was ignored.
  it.each([
    ["debounceMs: '10'", { debounceMs: '10' }, 'debounceMs'],
    ['debounceMs: 10n', { debounceMs: 10n }, 'debounceMs'],
    ['pollIntervalMs: 10n', { pollIntervalMs: 10n }, 'pollIntervalMs'],
    ["onReload: 'log'", { onReload: 'log' }, 'onReload'],
    ['onError: {}', { onError: {} }, 'onError'],
    ['debounce: 50', { debounce: 50 }, 'debounce'],
  ])('%s is a ConfigError naming the field, and nothing is watched', (_label, options, field) => {
    const caught = watchError(options);
    expect(caught).toBeInstanceOf(ConfigError);
    expect((caught as ConfigError).field).toBe(field);
  });
});
