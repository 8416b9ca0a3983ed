import { IncomingMessage } from 'node:http';

/**
 * `req[name] = value` for Express requests, without adding a property to the request.
 *
 * Express sets each request's prototype per request, so every request has a hidden class of its
 * own: a property added to it built a new one each time and left every later property access
 * on that request (in Express and the app) megamorphic, about 3 µs per request. Instead `name`
 * is an accessor on the prototype all of Express's requests share (below its per-app ones, so a
 * mounted sub-app's requests see it too), and the value is kept per request. Reading and
 * assigning `req[name]` works as with an own property; a request whose prototype chain is not
 * Express's, or a name something else already defines there, gets an own property as before.
 */
export function setRequestProperty(req: object, name: string, value: unknown): void {
  const shared = sharedPrototype(req);
  // Through the accessor's setter once it is there; else as any assignment.
  if (shared !== undefined && !Object.hasOwn(req, name)) ensureAccessor(shared, name);
  (req as Record<string, unknown>)[name] = value;
}

/** Values by property name, then by request. */
const values = new Map<string, WeakMap<object, unknown>>();
/** Prototypes given an accessor, by property name. */
const accessors = new Map<string, WeakSet<object>>();

/** The prototype right above `IncomingMessage.prototype` in the request's chain (Express's `request`). */
function sharedPrototype(req: object): object | undefined {
  let proto: object | null = Object.getPrototypeOf(req);
  // Express: req -> app.request -> express's request -> IncomingMessage.prototype.
  for (let depth = 0; proto !== null && depth < 4; depth++) {
    const above: object | null = Object.getPrototypeOf(proto);
    if (above === IncomingMessage.prototype) return proto;
    proto = above;
  }
  return undefined;
}

/** Gives `proto` this module's accessor for `name`, unless it (or its chain) defines `name` already. */
function ensureAccessor(proto: object, name: string): void {
  let done = accessors.get(name);
  if (done?.has(proto) || name in proto) return;
  if (done === undefined) {
    done = new WeakSet();
    accessors.set(name, done);
  }
  let byRequest = values.get(name);
  if (byRequest === undefined) {
    byRequest = new WeakMap();
    values.set(name, byRequest);
  }
  const store = byRequest;
  Object.defineProperty(proto, name, {
    configurable: true,
    enumerable: false,
    get(this: object) {
      return store.get(this);
    },
    set(this: object, value: unknown) {
      store.set(this, value);
    },
  });
  done.add(proto);
}
