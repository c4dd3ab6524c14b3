/**
 * JavaScript that runs INSIDE each isolate's one context, before the Reactor's code.
 *
 * It defines the Reactor globals (error classes, `fetch`, a silent `console`), then hardens the
 * realm (see `lockdown` below) and returns one function to the host: `('run', input, maxChars,
 * runNumber, bridgeConcurrency)` (or the same in steps: `('start', ...the same)`, `('take')`,
 * `('wait')`) or `('deliver', callId, ok, text)`. The only host object it sees is the bridge
 * callback, an `ivm.Callback` in "ignored" mode: inside the isolate it is a plain function that
 * posts (op, json, callId, runNumber) and returns undefined. The prelude removes it from the
 * global object and keeps it in its closure, so Reactor code can never reach it. Answers come
 * back through `deliver`, called by the host with copied strings; no ivm Reference is ever
 * handed to Reactor code.
 *
 * The context serves every call of its isolate (one Reactor version), one at a time, so that a
 * warm call costs no new V8 context. Calls share nothing they could write to: each call
 * instantiates the module afresh (its module scope, `module` and `exports` are new), and
 * before any Reactor code runs the global object, every built-in reachable from it and the
 * hidden intrinsics (iterator and generator prototypes...) are frozen, as SES's `lockdown`
 * does; the legacy RegExp statics, which remember the last string matched, are removed. A
 * value one call had can reach a later call only through the Reactor's own closures left
 * running, which the later call cannot reach either.
 *
 * Everything here trusts nothing Reactor code could change: built-ins are captured up front
 * (they are frozen anyway), and the host re-validates whatever `run` returns.
 */
export const BRIDGE_GLOBAL = '__tessera_bridge'

/** The one-shot global the module script hands the Reactor's factory to (see wrapModule). */
export const DEFINE_GLOBAL = '__tessera_define'

export const MODULE_FILENAME = 'reactor.js'

/**
 * CommonJS-style wrapper; the header sits on its own line so positions match the user's code.
 * Evaluating it only hands the factory function to the prelude (for code that cannot escape the
 * wrapper, see IsolateCache) and completes with `undefined`, so the host needs no reference to
 * it. The factory runs once per call, so every call gets its own module scope.
 */
export function wrapModule(code: string): string {
  return `${DEFINE_GLOBAL}(function (module, exports) {\n${code}\n}); void 0`
}

/** Line offset that cancels the wrapper's header line in compiler messages and stacks. */
export const MODULE_LINE_OFFSET = -1

export const PRELUDE_SOURCE = String.raw`
(function (global, bridge) {
  'use strict';
  const parse = JSON.parse;
  const stringify = JSON.stringify;
  const keys = Object.keys;
  const freeze = Object.freeze;
  const defineProperty = Object.defineProperty;
  const PromiseCtor = Promise;
  const StringCtor = String;
  const MapCtor = Map;
  const ErrorCtor = Error;
  const MAX_MESSAGE = 500;

  class BadRequestError extends Error {
    constructor(message) { super(message); this.name = 'BadRequestError'; }
  }
  class AuthenticationError extends Error {
    constructor(message) { super(message); this.name = 'AuthenticationError'; }
  }
  class AuthorizationError extends Error {
    constructor(message) { super(message); this.name = 'AuthorizationError'; }
  }
  class CustomHttpResponseError extends Error {
    constructor(response) {
      super('Custom HTTP response');
      const r = response || {};
      this.name = 'CustomHttpResponseError';
      this.status = r.status;
      this.headers = r.headers;
      this.body = r.body;
    }
  }

  // Calls posted to the host and not answered yet.
  const pending = new MapCtor();
  let nextCall = 0;
  // The host numbers each run of the Reactor; its bridge calls carry the number, so the host can
  // tell the calls of a run it stopped (see the host's invocation.ts) from those of the next.
  let runNumber = 0;
  // The API process serves at most maxInFlight calls of an invocation at once and refuses more
  // (host/bridge-budget.ts): calls beyond it wait here, in order, until an answer frees a place.
  // Their arguments stay in this isolate, under its memory limit. Calls still waiting when the
  // run ends are dropped, never made (run clears them).
  let maxInFlight = 1;
  let waiting = [];
  function call(op, payload) {
    let json;
    try { json = stringify(payload === undefined ? null : payload); }
    catch (e) { return PromiseCtor.reject(new ErrorCtor('The argument of ' + op + ' is not serializable as JSON')); }
    return new PromiseCtor(function (resolve, reject) {
      const waiter = { id: ++nextCall, op: op, json: json, resolve: resolve, reject: reject };
      if (pending.size < maxInFlight) post(waiter);
      else waiting.push(waiter);
    });
  }
  function post(waiter) {
    pending.set(waiter.id, waiter);
    bridge(waiter.op, waiter.json, waiter.id, runNumber);
    waiter.json = undefined;
  }
  function deliver(id, ok, text) {
    const p = pending.get(id);
    if (p === undefined) return;
    pending.delete(id);
    if (waiting.length > 0) post(waiting.shift());
    if (!ok) { p.reject(new Error(text)); return; }
    try { p.resolve(text === '' ? undefined : parse(text)); } catch (e) { p.reject(e); }
  }

  const svc = freeze({
    tokenize: function (value) { return call('tokenize', value); },
    detokenize: function (value) { return call('detokenize', value); },
  });

  function toHeaders(h) {
    const out = {};
    if (h !== null && typeof h === 'object') {
      for (const k of keys(h)) out[StringCtor(k).toLowerCase()] = StringCtor(h[k]);
    }
    return out;
  }
  async function fetch(url, init) {
    const o = init || {};
    let body = o.body;
    if (body !== undefined && body !== null && typeof body !== 'string') body = stringify(body);
    const res = await call('fetch', {
      url: StringCtor(url),
      method: o.method === undefined ? 'GET' : StringCtor(o.method).toUpperCase(),
      headers: toHeaders(o.headers),
      body: body === null ? undefined : body,
    });
    const text = res.body;
    return freeze({
      status: res.status,
      ok: res.status >= 200 && res.status < 300,
      headers: res.headers,
      body: text,
      text: async function () { return text; },
      json: async function () { return parse(text); },
    });
  }

  const noop = function () {};
  const consoleStub = freeze({ log: noop, info: noop, warn: noop, error: noop, debug: noop });
  let factory;
  // The factory is made after lockdown, and sloppy code reaches it as arguments.callee: frozen
  // with its prototype object, it holds nothing one call could leave for the next.
  function define(fn) {
    if (factory !== undefined) throw new TypeError('The Reactor module is already defined');
    freeze(fn);
    freeze(fn.prototype);
    factory = fn;
  }
  const expose = function (name, value) {
    defineProperty(global, name, { value: value, writable: false, configurable: false, enumerable: false });
  };
  expose('BadRequestError', BadRequestError);
  expose('AuthenticationError', AuthenticationError);
  expose('AuthorizationError', AuthorizationError);
  expose('CustomHttpResponseError', CustomHttpResponseError);
  expose('fetch', fetch);
  expose('console', consoleStub);
  expose('${DEFINE_GLOBAL}', define);
  // WebAssembly memory is allocated outside the isolate's heap limit (measured: gigabytes pass
  // through), and shared memory plus Atomics only buy a high-resolution timer here.
  delete global.WebAssembly;
  delete global.SharedArrayBuffer;
  delete global.Atomics;
  // Iterating Intl.Segmenter's segments of a long text runs in ICU code that V8 cannot stop:
  // a call past its 10 ms synchronous budget or its deadline ran on for seconds (3-55 s), and
  // the isolate's thread with it.
  delete Intl.Segmenter;
  lockdown();

  /**
   * Freezes the realm, so that calls sharing this context share nothing writable. Assigning a
   * property that a frozen prototype also has (\`this.name = ...\` in an Error subclass,
   * \`obj.toString = ...\`) would then fail (the "override mistake"): for the properties code
   * commonly overrides, the prototype gets an accessor whose setter creates the property on the
   * object assigned to, as SES does.
   */
  function lockdown() {
    const gopd = Object.getOwnPropertyDescriptor;
    const ownKeys = Reflect.ownKeys;
    const getProto = Object.getPrototypeOf;
    const hasOwn = Object.prototype.hasOwnProperty;
    const RegExpCtor = RegExp;
    const legacy = ['input', '$_', 'lastMatch', '$&', 'lastParen', '$+', 'leftContext', '$\`', 'rightContext', "$'", '$1', '$2', '$3', '$4', '$5', '$6', '$7', '$8', '$9'];
    for (const name of legacy) { const d = gopd(RegExpCtor, name); if (d && d.configurable) delete RegExpCtor[name]; }

    function enable(proto, name) {
      const d = gopd(proto, name);
      if (d === undefined || !('value' in d) || !d.configurable) return;
      const value = d.value;
      defineProperty(proto, name, {
        get: function () { return value; },
        set: function (v) {
          if (this === proto) throw new TypeError('Cannot assign to read only property ' + StringCtor(name) + ' of a built-in prototype');
          if (hasOwn.call(this, name)) { this[name] = v; return; }
          defineProperty(this, name, { value: v, writable: true, enumerable: true, configurable: true });
        },
        enumerable: d.enumerable,
        configurable: false,
      });
    }
    const errorProtos = [Error, EvalError, RangeError, ReferenceError, SyntaxError, TypeError, URIError, AggregateError,
      BadRequestError, AuthenticationError, AuthorizationError, CustomHttpResponseError].map(function (E) { return E.prototype; });
    for (const name of ['constructor', 'toString', 'valueOf', 'hasOwnProperty', 'isPrototypeOf', 'propertyIsEnumerable', 'toLocaleString']) enable(Object.prototype, name);
    for (const name of ['constructor', 'toString', 'apply', 'bind', 'call']) enable(Function.prototype, name);
    enable(Array.prototype, 'constructor');
    enable(Array.prototype, 'toString');
    enable(PromiseCtor.prototype, 'constructor');
    for (const proto of errorProtos) for (const name of ['constructor', 'name', 'message', 'toString']) enable(proto, name);

    // Intrinsics that no global property leads to.
    const hidden = [
      getProto([][Symbol.iterator]()), getProto(''[Symbol.iterator]()), getProto(new MapCtor()[Symbol.iterator]()),
      getProto(new Set()[Symbol.iterator]()), getProto(/a/[Symbol.matchAll]('a')),
      getProto(function* () {}), getProto(async function () {}), getProto(async function* () {}),
      getProto((function* () {})()), getProto((async function* () {})()),
      gopd((function () { 'use strict'; return arguments; })(), 'callee').get,
    ];
    const seen = new WeakSet();
    const todo = [global].concat(hidden);
    while (todo.length > 0) {
      const o = todo.pop();
      if (o === null || (typeof o !== 'object' && typeof o !== 'function') || seen.has(o)) continue;
      seen.add(o);
      freeze(o);
      todo.push(getProto(o));
      for (const key of ownKeys(o)) {
        const d = gopd(o, key);
        if (d === undefined) continue;
        if ('value' in d) todo.push(d.value);
        else todo.push(d.get, d.set);
      }
    }
  }

  // The engine quotes values in its own messages (JSON.parse: the text it failed on; TypeError:
  // the string it could not index), and in a Reactor those values are revealed data. Only text
  // the author wrote on purpose (Error, the Tessera error classes, a thrown string) goes out.
  // A few engine messages never carry a value and say what went wrong; they pass.
  const ENGINE_ERRORS = [SyntaxError, TypeError, RangeError, ReferenceError, URIError, EvalError];
  const SAFE_ENGINE_MESSAGES = ['Maximum call stack size exceeded', 'Invalid array length', 'Invalid string length', 'URI malformed'];
  function messageOf(e) {
    try {
      for (const E of ENGINE_ERRORS) {
        if (!(e instanceof E)) continue;
        const m = StringCtor(e.message);
        if (SAFE_ENGINE_MESSAGES.indexOf(m) >= 0) return E.name + ': ' + m;
        return 'The Reactor threw a ' + E.name + ' (its message is withheld: it may quote data)';
      }
      const m = e instanceof Error ? StringCtor(e.message) : StringCtor(e);
      return m.length > MAX_MESSAGE ? m.slice(0, MAX_MESSAGE) + '...' : m;
    } catch (_) { return 'The Reactor threw a value that cannot be described'; }
  }
  function describe(e) {
    if (e instanceof CustomHttpResponseError) {
      return [{ kind: 'response', status: e.status, headers: e.headers === undefined ? {} : e.headers }, e.body];
    }
    const code = e instanceof BadRequestError ? 'bad_request'
      : e instanceof AuthenticationError ? 'unauthenticated'
      : e instanceof AuthorizationError ? 'forbidden'
      : 'reactor_error';
    return [{ kind: 'error', code: code, message: messageOf(e) }, undefined];
  }
  function encode(meta, value, maxChars) {
    let m, v;
    try {
      m = stringify(meta);
      v = value === undefined ? '' : stringify(value);
      if (v === undefined) v = '';
    } catch (e) {
      return [stringify({ kind: 'error', code: 'reactor_error', message: 'The Reactor result is not serializable as JSON.' }), ''];
    }
    // UTF-8 needs at least one byte per UTF-16 unit, so this never lets an oversized result out.
    if (m.length + v.length > maxChars) return [stringify({ kind: 'too_large' }), ''];
    return [m, v];
  }

  async function run(input, maxChars, number, bridgeConcurrency) {
    // Answers still owed to an earlier call are never delivered (its link is closed); forget them.
    pending.clear();
    waiting = [];
    runNumber = number;
    maxInFlight = typeof bridgeConcurrency === 'number' && bridgeConcurrency >= 1 ? bridgeConcurrency : 1;
    let meta, value;
    try {
      if (typeof factory !== 'function') throw new TypeError('The Reactor module did not load');
      const req = parse(input);
      const module = { exports: {} };
      factory.call(module.exports, module, module.exports);
      const handler = module.exports;
      if (typeof handler !== 'function') throw new ErrorCtor('module.exports must be a function');
      value = await handler({ args: req.args, configuration: req.configuration, svc: svc });
      meta = { kind: 'ok' };
    } catch (e) {
      try { const d = describe(e); meta = d[0]; value = d[1]; }
      catch (_) { meta = { kind: 'error', code: 'reactor_error', message: 'The Reactor threw an unreadable error' }; value = undefined; }
    }
    // The invocation ends with this answer: calls the code did not await and that still wait
    // for a place would never be posted (the link closes), and need not keep their arguments.
    if (runNumber === number) waiting = [];
    return encode(meta, value, maxChars);
  }

  // A call the host runs synchronously (see invocation.ts): 'start' runs it up to its first
  // wait on something outside the isolate (a bridge call), and the host's synchronous call
  // returns only after the microtasks ran, so 'take' then has the result of a call that needed
  // nothing from outside; otherwise the host asks to 'wait' for it. Only the latest call is held.
  let started, startedResult;
  function start(input, maxChars, number, bridgeConcurrency) {
    startedResult = undefined;
    const p = started = run(input, maxChars, number, bridgeConcurrency);
    p.then(function (r) { if (started === p) startedResult = r; });
  }
  function take() {
    const r = startedResult;
    if (r === undefined) return null;
    started = startedResult = undefined;
    return r;
  }
  function wait() {
    const p = started;
    started = undefined;
    return p;
  }

  // The host's one handle on this context: run the Reactor (once per call), or deliver a bridge
  // answer; or start it (synchronously), take its result if it has one, or wait for it.
  return function (op, a, b, c, d) {
    if (op === 'deliver') return deliver(a, b, c);
    if (op === 'start') return start(a, b, c, d);
    if (op === 'take') return take();
    if (op === 'wait') return wait();
    return run(a, b, c, d);
  };
})(globalThis, (function () {
  const b = globalThis.${BRIDGE_GLOBAL};
  delete globalThis.${BRIDGE_GLOBAL};
  return b;
})())
`
