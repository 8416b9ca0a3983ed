import { IncomingMessage } from 'node:http';

/** Sets `req[name]` (`res` is the response Express linked to `req`); see `requestPropertySetter`. */
export type RequestPropertySetter = (req: object, res: object, value: unknown) => void;

/**
 * `req[name] = value` for Express requests, without adding a property to the request.
 *
 * Express swaps each request's prototype and then adds properties to it, so every request has a
 * hidden class of its own: a property added to it copies that class (descriptors and all), and a
 * WeakMap keyed by requests makes every GC trace an ephemeron per request. Either cost about
 * 1.5 µs per request (bench/adapter.ts, Express). Instead `name` is an accessor on the prototype all
 * of Express's requests share (below its per-app ones, so a mounted sub-app's requests see it too),
 * and the value lives in `res.locals`, the request-scoped object Express makes for every response
 * (a dictionary: adding to it is a hash insert), under a symbol and not enumerable, so templates,
 * spreads and JSON of `res.locals` never see it. Reading and assigning `req[name]` works as with an
 * own property. A request without `res.locals` keeps its value in a WeakMap instead; one whose
 * prototype chain is not Express's, or a name something else already defines there, gets an own
 * property as before.
 */
export function requestPropertySetter(name: string): RequestPropertySetter {
  const slot = slotOf(name);
  // Express's per-app request prototype, and what it implies: checked once per app, not per request.
  let seenPrototype: object | null | undefined;
  let accessor = false;
  return (req, res, value) => {
    const prototype: object | null = Object.getPrototypeOf(req);
    if (prototype !== seenPrototype) {
      const shared = sharedPrototype(prototype);
      accessor = shared !== undefined && ensureAccessor(shared, name, slot);
      seenPrototype = prototype;
    }
    // The response as passed, not `req.res`: every property read off an Express request or response
    // is a lookup of its own (each has a hidden class of its own), about 0.15 µs.
    if (accessor && !Object.hasOwn(req, name)) keep(slot, req, res, value);
    else (req as Record<string, unknown>)[name] = value;
  };
}

/** Where the values of one property name live. */
interface Slot {
  /** Its key in `res.locals`. */
  readonly symbol: symbol;
  /** Values of requests without `res.locals`. */
  readonly byRequest: WeakMap<object, unknown>;
}

const slots = new Map<string, Slot>();
/** Prototypes given an accessor, by property name. */
const accessors = new Map<string, WeakSet<object>>();

function slotOf(name: string): Slot {
  let slot = slots.get(name);
  if (slot === undefined) {
    slot = { symbol: Symbol(`tokenlease.${name}`), byRequest: new WeakMap() };
    slots.set(name, slot);
  }
  return slot;
}

/** `res.locals` when Express gave the response one. */
function localsOf(res: object | undefined): object | undefined {
  const locals: unknown = (res as { locals?: unknown } | undefined)?.locals;
  return typeof locals === 'object' && locals !== null ? locals : undefined;
}

/** The response Express linked to a request. */
function responseOf(req: object): object | undefined {
  return (req as { res?: object }).res;
}

/** The descriptor `keep` defines with, its `value` set for each call: no object per request. */
const KEPT: PropertyDescriptor = { value: undefined, writable: true, enumerable: false, configurable: true };

function keep(slot: Slot, req: object, res: object | undefined, value: unknown): void {
  const locals = localsOf(res);
  KEPT.value = value;
  const kept = locals !== undefined && Reflect.defineProperty(locals, slot.symbol, KEPT);
  KEPT.value = undefined;
  if (!kept) slot.byRequest.set(req, value);
}

function read(slot: Slot, req: object): unknown {
  const locals = localsOf(responseOf(req));
  if (locals !== undefined && Object.hasOwn(locals, slot.symbol)) {
    return (locals as Record<symbol, unknown>)[slot.symbol];
  }
  return slot.byRequest.get(req);
}

/** The prototype right above `IncomingMessage.prototype` in a request's chain (Express's `request`). */
function sharedPrototype(prototype: object | null): object | undefined {
  let proto = prototype;
  // Express: req -> app.request -> express's request -> IncomingMessage.prototype.
  for (let depth = 0; proto !== null && depth < 4; depth++) {
    const above: object | null = Object.getPrototypeOf(proto);
    if (above === IncomingMessage.prototype) return proto;
    proto = above;
  }
  return undefined;
}

/**
 * Gives `proto` this module's accessor for `name`, unless it (or its chain) defines `name` already.
 * True when the accessor is this module's.
 */
function ensureAccessor(proto: object, name: string, slot: Slot): boolean {
  let done = accessors.get(name);
  if (done?.has(proto)) return true;
  if (name in proto) return false;
  if (done === undefined) {
    done = new WeakSet();
    accessors.set(name, done);
  }
  Object.defineProperty(proto, name, {
    configurable: true,
    enumerable: false,
    get(this: object) {
      return read(slot, this);
    },
    set(this: object, value: unknown) {
      keep(slot, this, responseOf(this), value);
    },
  });
  done.add(proto);
  return true;
}
