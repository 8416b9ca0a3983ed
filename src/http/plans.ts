import { createHash } from 'node:crypto';
import { type FSWatcher, readFileSync, statSync, unwatchFile, watch, watchFile } from 'node:fs';
import { basename, dirname, resolve } from 'node:path';
import { CORE_SCHEMA, load, realMapTag, YAMLException } from 'js-yaml';
import {
  type Document,
  isMap,
  isPair,
  isScalar,
  isSeq,
  LineCounter,
  type Node,
  parseDocument,
  visit,
} from 'yaml';
import { MAX_TIMER_MS, MIN_DURATION_MS } from '../duration.js';
import { ConfigError, shown, TokenleaseError } from '../errors.js';
import type { Limiter } from '../limiter.js';
import { isOptionsObject, knownOptions } from '../options.js';
import { compilePolicy, type PolicyConfig, policyOptions } from '../policy.js';
import { ClientList, type CompiledRule, compileCosts, compileRule, type RuleSet } from './rules.js';

/**
 * A plans file that does not parse or validate. The message names the file, line and column and
 * the field (`plans.yaml:12:14: Invalid \`plans.pro.rules.per-key.rate\`: expected …`).
 */
export class PlansError extends TokenleaseError {
  readonly source: string;
  /** 1-based; undefined when the problem has no place in the file (e.g. it cannot be read). */
  readonly line: number | undefined;
  readonly column: number | undefined;

  constructor(
    source: string,
    message: string,
    options: { field?: string; line?: number; column?: number; cause?: unknown } = {},
  ) {
    const where = options.line === undefined ? source : `${source}:${options.line}:${options.column ?? 1}`;
    const what = options.field === undefined ? message : `Invalid \`${options.field}\`: ${message}`;
    super('ERR_TOKENLEASE_PLANS', `${where}: ${what}`, { field: options.field, cause: options.cause });
    this.source = source;
    this.line = options.line;
    this.column = options.column;
  }
}

/** Fields of a rule in a plans file that are about HTTP; the rest describe the limiter policy. */
const HTTP_FIELDS = ['by', 'routes', 'weighted', 'shadow', 'enforce'];
const WATCH_OPTIONS: readonly (keyof WatchOptions)[] = [
  'limiter',
  'debounceMs',
  'pollIntervalMs',
  'onReload',
  'onError',
];
const TOP_FIELDS = ['defaultPlan', 'rules', 'plans', 'keys', 'costs', 'allow', 'deny'];
const PLAN_FIELDS = ['rules'];
const API_KEY = /^[\x21-\x7e]{1,256}$/;

type Path = readonly (string | number)[];

/** What reloading changed, by limiter policy name (`<plan>/<rule>`, or `*\/<rule>` for `rules`). */
export interface PlansChange {
  added: string[];
  changed: string[];
  removed: string[];
}

export interface WatchOptions {
  /** Receives the new policies (`limiter.setPolicies`) before requests see the new rules. */
  limiter: Limiter;
  /**
   * Waits this long after the last change event before reading, and a change goes live only once
   * two reads this far apart agree (same content, size and mtime): a file caught while it is
   * written in place, in pieces, is read again rather than applied half-written. Writing a new
   * file and renaming it over the old one is atomic and always safe.
   * @default 100
   */
  debounceMs?: number;
  /**
   * Polls the file's mtime at this interval instead of `fs.watch` (for file systems without
   * change events, e.g. some network mounts).
   * @default undefined (fs.watch on the file's directory, which survives editors that save by rename)
   */
  pollIntervalMs?: number;
  /** A new config is live. */
  onReload?: (change: PlansChange) => void;
  /** A new file was rejected; the previous config keeps running. @default process.emitWarning */
  onError?: (error: PlansError) => void;
}

interface Compiled {
  readonly digest: string;
  readonly policies: Record<string, PolicyConfig>;
  readonly ruleSet: RuleSet<unknown>;
}

/**
 * Plans (tariffs) from a YAML or JSON file: rules per plan, API keys to plans, route costs and
 * allow/deny lists. `watch()` reloads it on change without a restart; a bad file is reported and
 * the previous config keeps running.
 *
 * ```yaml
 * defaultPlan: free              # requests without a listed API key (counted by IP)
 * rules:                          # every request, whatever its plan
 *   per-ip: { rate: 50, by: ip }
 * plans:
 *   free: { rules: { per-key: { rate: 5, burst: 10 } } }
 *   pro:
 *     rules:
 *       per-key: { rate: 100 }
 *       daily: { rate: 1000000, period: 1d, weighted: false, shadow: true }
 * keys: { k_live_42: pro, k_monitoring: pro }
 * costs: { "POST /reports": 20 }
 * allow: [k_monitoring, 10.0.0.0/8]   # an API key here must be listed in keys
 * deny: [k_leaked]
 * ```
 */
export class Plans {
  readonly source: string;
  #compiled: Compiled;
  #watcher: FSWatcher | undefined;
  #poller: (() => void) | undefined;
  #timer: NodeJS.Timeout | undefined;
  #watch: WatchOptions | undefined;
  /** The first of two reads that must agree before a change goes live. */
  #candidate: Snapshot | undefined;

  private constructor(source: string, compiled: Compiled) {
    this.source = source;
    this.#compiled = compiled;
  }

  /** Reads and validates a plans file; throws `PlansError` naming the line and field. */
  static fromFile(path: string): Plans {
    const source = resolve(path);
    const snapshot = read(source);
    if (snapshot.error) throw snapshot.error;
    return new Plans(source, compilePlans(snapshot.text, source));
  }

  /** Validates plans given as text (YAML or JSON); `source` names it in errors. */
  static parse(text: string, source = '<plans>'): Plans {
    return new Plans(source, compilePlans(text, source));
  }

  /** The limiter policies the plans define: pass them to `new Limiter({ policies })`. */
  get policies(): Record<string, PolicyConfig> {
    return this.#compiled.policies;
  }

  /** The rules now in force (read per request by the middleware). */
  ruleSet(): RuleSet<unknown> {
    return this.#compiled.ruleSet;
  }

  /** Starts watching the file. Returns `this`; stop with `close()`. */
  watch(options: WatchOptions): this {
    if (typeof options?.limiter?.setPolicies !== 'function') {
      throw new ConfigError('limiter', 'expected the tokenlease Limiter that uses these plans');
    }
    knownOptions(options, WATCH_OPTIONS);
    const debounce = timerMs(options.debounceMs ?? 100, 'debounceMs', 0);
    const interval =
      options.pollIntervalMs === undefined
        ? undefined
        : timerMs(options.pollIntervalMs, 'pollIntervalMs', MIN_DURATION_MS);
    for (const callback of ['onReload', 'onError'] as const) {
      if (options[callback] !== undefined && typeof options[callback] !== 'function') {
        throw new ConfigError(callback, `expected a function, got ${shown(options[callback])}`);
      }
    }
    this.close();
    this.#watch = options;
    const schedule = () => {
      clearTimeout(this.#timer);
      this.#candidate = undefined;
      this.#timer = setTimeout(() => this.#settle(debounce), debounce);
    };
    if (interval !== undefined) {
      watchFile(this.source, { interval, persistent: false }, schedule);
      this.#poller = schedule;
    } else {
      const file = basename(this.source);
      this.#watcher = watch(dirname(this.source), { persistent: false }, (_event, name) => {
        if (name === null || name === file) schedule();
      });
      this.#watcher.on('error', (err) =>
        this.#fail(new PlansError(this.source, `watching failed: ${err.message}`, { cause: err })),
      );
    }
    return this;
  }

  /**
   * Reads the file now and applies it if it changed and is valid. Returns whether a new config went
   * live; a rejected file is reported to `onError` and changes nothing.
   */
  reload(): boolean {
    if (!this.#watch) throw new ConfigError('limiter', 'call watch({ limiter }) before reload()');
    return this.#apply(read(this.source));
  }

  /** The watcher's read: applies the file once two reads `interval` apart agree, else reads again. */
  #settle(interval: number): void {
    const snapshot = read(this.source);
    const previous = this.#candidate;
    if (previous === undefined || !sameSnapshot(previous, snapshot)) {
      this.#candidate = snapshot;
      this.#timer = setTimeout(() => this.#settle(interval), interval);
      return;
    }
    this.#candidate = undefined;
    this.#apply(snapshot);
  }

  #apply(snapshot: Snapshot): boolean {
    const options = this.#watch!;
    let next: Compiled;
    try {
      if (snapshot.error) throw snapshot.error;
      next = compilePlans(snapshot.text, this.source);
    } catch (err) {
      this.#fail(err);
      return false;
    }
    if (next.digest === this.#compiled.digest) return false;
    try {
      options.limiter.setPolicies(next.policies);
    } catch (err) {
      this.#fail(err);
      return false;
    }
    const change = diff(this.#compiled.policies, next.policies);
    this.#compiled = next;
    options.onReload?.(change);
    return true;
  }

  /** Stops watching. Idempotent. */
  close(): void {
    clearTimeout(this.#timer);
    this.#candidate = undefined;
    this.#watcher?.close();
    this.#watcher = undefined;
    if (this.#poller) unwatchFile(this.source, this.#poller);
    this.#poller = undefined;
  }

  #fail(err: unknown): void {
    const error =
      err instanceof PlansError
        ? err
        : new PlansError(this.source, err instanceof Error ? err.message : String(err), { cause: err });
    if (this.#watch?.onError) this.#watch.onError(error);
    else process.emitWarning(error);
  }
}

/** One read of the file: its text with the size and mtime it had, or why it could not be read. */
type Snapshot =
  | { readonly text: string; readonly stamp: string; readonly error?: undefined }
  | { readonly text?: undefined; readonly stamp: string; readonly error: PlansError };

function read(source: string): Snapshot {
  try {
    const before = statSync(source);
    const text = readFileSync(source, 'utf8');
    const after = statSync(source);
    const stamp =
      before.size === after.size && before.mtimeMs === after.mtimeMs
        ? `${after.size}:${after.mtimeMs}`
        : CHANGING;
    return { text, stamp };
  } catch (err) {
    const message = `cannot read the plans file: ${(err as Error).message}`;
    return { stamp: `error:${message}`, error: new PlansError(source, message, { cause: err }) };
  }
}

/** The stamp of a file written to while it was read: it agrees with no other read. */
const CHANGING = 'changing';

function sameSnapshot(a: Snapshot, b: Snapshot): boolean {
  return a.stamp !== CHANGING && a.stamp === b.stamp && a.text === b.text;
}

function diff(before: Record<string, PolicyConfig>, after: Record<string, PolicyConfig>): PlansChange {
  const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);
  return {
    added: Object.keys(after).filter((k) => !(k in before)),
    changed: Object.keys(after).filter((k) => k in before && !same(before[k], after[k])),
    removed: Object.keys(before).filter((k) => !(k in after)),
  };
}

/** Most nodes the data may expand to through aliases, per character of the file. */
const NODES_PER_CHAR = 2;

/**
 * Parses and validates plans text; every error names its line and column.
 *
 * The text is parsed with js-yaml, which reads 100 000 API keys in a few hundred ms where yaml's
 * positioned document takes seconds. yaml builds that document only when something is wrong, to
 * say where (the error path may be slow; the reload of a good file is not).
 */
function compilePlans(text: string, source: string): Compiled {
  let positioned: { doc: Document; lines: LineCounter } | undefined;
  const document = () => {
    if (positioned) return positioned;
    const lines = new LineCounter();
    // Not yaml's own `uniqueKeys` check: it compares each key with every earlier one (quadratic).
    const doc = parseDocument(text, { lineCounter: lines, uniqueKeys: false, prettyErrors: true });
    positioned = { doc, lines };
    return positioned;
  };

  let data: unknown;
  try {
    const loaded = load(text, { schema: SCHEMA, maxAliases: 100 });
    // Without a `*` there is no alias, and nothing to expand.
    if (text.includes('*') && !withinSize(loaded, NODES_PER_CHAR * text.length + 1000)) {
      throw new PlansError(source, 'aliases expand to too much data (an alias bomb?)');
    }
    data = plainTop(loaded);
  } catch (err) {
    if (err instanceof PlansError) throw err;
    throw syntaxError(err, document(), source);
  }

  /** Throws naming the place of `path` (its key when `at` is 'key', else its value). */
  const fail = (path: Path, message: string, at: 'key' | 'value' = 'value'): never => {
    const { doc, lines } = document();
    const offset = offsetOf(doc.contents, path, at);
    const pos = offset === undefined ? undefined : lines.linePos(offset);
    throw new PlansError(source, message, {
      field: fieldName(path),
      ...(pos && { line: pos.line, column: pos.col }),
    });
  };
  /** Re-throws a ConfigError from a compile function at the place its field suffix names. */
  const at = <T>(path: Path, prefix: string, compile: () => T): T => {
    try {
      return compile();
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      const suffix = err.field?.startsWith(prefix) ? parseField(err.field.slice(prefix.length)) : [];
      const reason = err.message.replace(/^Invalid `[^`]*`: /, '');
      return fail([...path, ...suffix], reason);
    }
  };

  const top = mapping(data, [], fail, 'the plans file');
  unknownFields(top, TOP_FIELDS, [], fail);

  const policies: Record<string, PolicyConfig> = {};
  const compileRules = (raw: unknown, path: Path, prefix: string): CompiledRule<unknown>[] => {
    const rules = mapping(raw, path, fail, 'rules: a mapping of rule names to rules');
    return Object.entries(rules).map(([name, rule]) => {
      const rulePath = [...path, name];
      const r = mapping(rule, rulePath, fail, 'a rule like { rate: 100, period: 1s }');
      const algorithm = r.algorithm ?? 'token-bucket';
      const known = policyOptions(String(algorithm));
      if (known) unknownFields(r, [...known, ...HTTP_FIELDS], rulePath, fail);
      const policy = `${prefix}/${name}`;
      const config: Record<string, unknown> = { algorithm };
      for (const [k, v] of Object.entries(r)) if (!HTTP_FIELDS.includes(k)) config[k] = v;
      at(rulePath, `policies.${policy}`, () => compilePolicy(policy, config));
      policies[policy] = config as unknown as PolicyConfig;
      const http = Object.fromEntries(HTTP_FIELDS.filter((k) => k in r).map((k) => [k, r[k]]));
      return at(rulePath, 'rule', () => compileRule<unknown>({ ...http, policy, name }, 'rule'));
    });
  };

  const globalRules = top.rules === undefined ? [] : compileRules(top.rules, ['rules'], '*');
  const plans = new Map<string, CompiledRule<unknown>[]>();
  const rawPlans =
    top.plans === undefined
      ? {}
      : mapping(top.plans, ['plans'], fail, 'plans: a mapping of plan names to plans');
  for (const [name, plan] of Object.entries(rawPlans)) {
    if (name.includes('/') || name === '*')
      fail(['plans', name], "plan names may not contain '/' or be '*'", 'key');
    const p = mapping(plan, ['plans', name], fail, 'a plan like { rules: { per-key: { rate: 100 } } }');
    unknownFields(p, PLAN_FIELDS, ['plans', name], fail);
    plans.set(name, p.rules === undefined ? [] : compileRules(p.rules, ['plans', name, 'rules'], name));
  }
  if (Object.keys(policies).length === 0)
    fail([], 'expected at least one rule under `rules` or `plans.<plan>.rules`');

  const knownPlans = () => [...plans.keys()].map((p) => JSON.stringify(p)).join(', ') || 'none';
  const keys = new Map<string, string>();
  const rawKeys =
    top.keys === undefined || top.keys instanceof Map
      ? ((top.keys as Map<string, unknown> | undefined) ?? new Map<string, unknown>())
      : mapping(top.keys, ['keys'], fail, 'keys: a mapping of API keys to plan names');
  for (const [key, plan] of rawKeys instanceof Map ? rawKeys : Object.entries(rawKeys)) {
    if (!API_KEY.test(key))
      fail(['keys', key], 'API keys are 1-256 printable ASCII characters without spaces', 'key');
    if (typeof plan !== 'string' || !plans.has(plan)) {
      fail(['keys', key], `unknown plan ${JSON.stringify(plan)}; known plans: ${knownPlans()}`);
    }
    keys.set(key, plan as string);
  }
  const defaultPlan = top.defaultPlan;
  if (defaultPlan !== undefined && (typeof defaultPlan !== 'string' || !plans.has(defaultPlan))) {
    fail(['defaultPlan'], `unknown plan ${JSON.stringify(defaultPlan)}; known plans: ${knownPlans()}`);
  }

  const ruleSet: RuleSet<unknown> = {
    rules: globalRules,
    plans,
    keys,
    defaultPlan: defaultPlan as string | undefined,
    costs: at(['costs'], 'costs', () => compileCosts(top.costs, 'costs')),
    allow: at(['allow'], 'allow', () => new ClientList(top.allow, 'allow')),
    deny: at(['deny'], 'deny', () => new ClientList(top.deny, 'deny')),
  };
  return { digest: createHash('sha256').update(text).digest('hex'), policies, ruleSet };
}

/**
 * What js-yaml refused, said as yaml says it (with yaml's error code, at its place), or in
 * js-yaml's words where yaml sees no problem.
 */
function syntaxError(
  err: unknown,
  { doc, lines }: { doc: Document; lines: LineCounter },
  source: string,
): PlansError {
  const syntax = doc.errors[0];
  if (syntax) {
    const pos = syntax.linePos?.[0];
    return new PlansError(source, `${syntax.message.split(' at line ')[0]} (${syntax.code})`, {
      ...(pos && { line: pos.line, column: pos.col }),
      cause: err,
    });
  }
  const duplicate = firstDuplicateKey(doc);
  if (duplicate?.range) {
    const pos = lines.linePos(duplicate.range[0]);
    return new PlansError(source, 'Map keys must be unique (DUPLICATE_KEY)', {
      line: pos.line,
      column: pos.col,
      cause: err,
    });
  }
  const mark = err instanceof YAMLException ? err.mark : undefined;
  const reason = err instanceof YAMLException ? err.reason : String(err);
  return new PlansError(source, reason, {
    ...(mark && { line: mark.line + 1, column: mark.column + 1 }),
    cause: err,
  });
}

/**
 * Whether `data` has at most `budget` nodes counted as if aliases were copies: js-yaml shares an
 * aliased node instead of copying it, so a few lines of nested aliases would otherwise expand to
 * billions of nodes later (when policies are compared or serialised).
 */
function withinSize(data: unknown, budget: number): boolean {
  const stack: object[] = typeof data === 'object' && data !== null ? [data] : [];
  let nodes = 1;
  while (stack.length > 0) {
    const node = stack.pop()!;
    const children = node instanceof Map ? [...node.values()] : Object.values(node);
    nodes += children.length;
    if (nodes > budget) return false;
    for (const child of children) if (typeof child === 'object' && child !== null) stack.push(child);
  }
  return true;
}

/** YAML 1.2 core schema, mappings as `Map`s (see `plainTop`). */
const SCHEMA = CORE_SCHEMA.withTags(realMapTag);

/**
 * Mappings come from js-yaml as `Map`s: enumerating a plain object of 100 000 keys costs more than
 * parsing them. Every mapping becomes a plain object (keys as strings, as YAML-to-JSON has them)
 * except the top-level `keys`, which stays a `Map` of strings for the one loop over it.
 */
function plainTop(data: unknown): unknown {
  if (!(data instanceof Map)) return plain(data);
  return fromMap(data, (name, value) =>
    name === 'keys' && value instanceof Map ? stringKeys(value) : plain(value),
  );
}

function plain(value: unknown): unknown {
  if (value instanceof Map) return fromMap(value, (_name, v) => plain(v));
  if (Array.isArray(value)) return value.map(plain);
  return value;
}

/** `fromEntries` defines `__proto__` as an own key rather than setting the prototype. */
function fromMap(map: Map<unknown, unknown>, convert: (name: string, value: unknown) => unknown): object {
  const names = stringKeys(map);
  return Object.fromEntries([...names].map(([name, value]) => [name, convert(name, value)]));
}

/** The map with its keys as strings; two keys with one string form (`1` and `"1"`) are duplicates. */
function stringKeys(map: Map<unknown, unknown>): Map<string, unknown> {
  const out = new Map<string, unknown>();
  for (const [key, value] of map) {
    const name = String(key);
    if (out.has(name)) throw new YAMLException(`duplicated mapping key ${JSON.stringify(name)}`);
    out.set(name, value);
  }
  return out;
}

/** The first key of any mapping that repeats an earlier key of the same mapping. */
function firstDuplicateKey(doc: Document): Node | undefined {
  let found: Node | undefined;
  visit(doc, {
    Map(_key, map) {
      const seen = new Set<string>();
      for (const pair of map.items) {
        const key = pair.key;
        const name = isScalar(key) ? `s:${String(key.value)}` : undefined;
        if (name === undefined) continue;
        if (seen.has(name)) {
          found = key as Node;
          return visit.BREAK;
        }
        seen.add(name);
      }
      return undefined;
    },
  });
  return found;
}

function mapping(
  value: unknown,
  path: Path,
  fail: (path: Path, message: string) => never,
  expected: string,
): Record<string, unknown> {
  if (!isOptionsObject(value)) {
    return fail(
      path,
      `expected ${expected}, got ${value === null ? 'nothing' : Array.isArray(value) ? 'a list' : JSON.stringify(value)}`,
    );
  }
  return value as Record<string, unknown>;
}

/** A delay a timer waits for, in ms from `min` to `MAX_TIMER_MS` (a longer one fires at once). */
function timerMs(value: unknown, field: string, min: number): number {
  if (typeof value !== 'number' || !(value >= min && value <= MAX_TIMER_MS)) {
    throw new ConfigError(
      field,
      `expected a number of ms from ${min} to ${MAX_TIMER_MS}, got ${shown(value)}`,
    );
  }
  return value;
}

function unknownFields(
  value: Record<string, unknown>,
  known: readonly string[],
  path: Path,
  fail: (path: Path, message: string, at: 'key') => never,
): void {
  for (const key of Object.keys(value)) {
    if (!known.includes(key)) {
      fail(
        [...path, key],
        `unknown field; expected one of ${known.map((k) => `\`${k}\``).join(', ')}`,
        'key',
      );
    }
  }
}

/** `plans.pro.rules.per-key.rate`, with odd names quoted: `keys["k 1"]`. */
function fieldName(path: Path): string {
  if (path.length === 0) return '(file)';
  return path
    .map((p, i) => {
      if (typeof p === 'number') return `[${p}]`;
      if (/^[A-Za-z0-9_-]+$/.test(p)) return i === 0 ? p : `.${p}`;
      return `[${JSON.stringify(p)}]`;
    })
    .join('');
}

/** `.lease.ttl`, `[2]`, `["POST /x"]` (the suffix of a ConfigError field) -> path segments. */
function parseField(suffix: string): (string | number)[] {
  const out: (string | number)[] = [];
  for (const m of suffix.matchAll(/\.([^.[]+)|\[(\d+)\]|\[("(?:[^"\\]|\\.)*")\]/g)) {
    if (m[1] !== undefined) out.push(m[1]);
    else if (m[2] !== undefined) out.push(Number(m[2]));
    else if (m[3] !== undefined) out.push(JSON.parse(m[3]) as string);
  }
  return out;
}

/** Source offset of the node at `path`, or of its nearest ancestor that exists. */
function offsetOf(root: unknown, path: Path, at: 'key' | 'value'): number | undefined {
  let node = root as Node | null;
  let offset = (node as { range?: [number] } | null)?.range?.[0];
  for (const [i, segment] of path.entries()) {
    const last = i === path.length - 1;
    if (isMap(node)) {
      const pair = node.items.find(
        (p) => isPair(p) && isScalar(p.key) && String(p.key.value) === String(segment),
      );
      if (!pair) return offset;
      const key = pair.key as Node;
      const value = pair.value as Node | null;
      if (last && at === 'key') return key.range?.[0] ?? offset;
      node = value;
      offset = value?.range?.[0] ?? key.range?.[0] ?? offset;
    } else if (isSeq(node) && typeof segment === 'number') {
      const item = node.items[segment] as Node | undefined;
      if (!item) return offset;
      node = item;
      offset = item.range?.[0] ?? offset;
    } else {
      return offset;
    }
  }
  return offset;
}
