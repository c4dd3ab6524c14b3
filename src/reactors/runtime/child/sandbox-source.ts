/**
 * JavaScript that runs INSIDE each fresh isolate context, before the Reactor's code.
 *
 * It defines the Reactor globals (error classes, `fetch`, a silent `console`) and returns one
 * function to the host: `('run', input, maxChars)` or `('deliver', callId, ok, text)`. The only host object it sees is the bridge callback, an
 * `ivm.Callback` in "ignored" mode: inside the isolate it is a plain function that posts
 * (op, json, callId) and returns undefined. The prelude removes it from the global object
 * and keeps it in its closure, so Reactor code can never reach it. Answers come back through
 * `deliver`, called by the host with copied strings; no ivm Reference is ever handed to
 * Reactor code.
 *
 * Everything here trusts nothing Reactor code can change later: built-ins are captured up
 * front, and the host re-validates whatever `run` returns (a Reactor that patches JSON or
 * Promise can only break its own invocation, which has its own context).
 */
export const BRIDGE_GLOBAL = '__tessera_bridge'

/** Where the module script leaves the Reactor's factory; `run` takes it (and deletes it) first thing. */
export const FACTORY_GLOBAL = '__tessera_factory'

export const MODULE_FILENAME = 'reactor.js'

/**
 * CommonJS-style wrapper; the header sits on its own line so positions match the user's code.
 * Evaluating it only stores the factory function (for code that cannot escape the wrapper, see
 * IsolateCache) and completes with `undefined`, so the host needs no reference to it.
 */
export function wrapModule(code: string): string {
  return `globalThis.${FACTORY_GLOBAL} = (function (module, exports) {\n${code}\n}); void 0`
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

  const pending = new MapCtor();
  let nextCall = 0;
  function call(op, payload) {
    let json;
    try { json = stringify(payload === undefined ? null : payload); }
    catch (e) { return PromiseCtor.reject(new ErrorCtor('The argument of ' + op + ' is not serializable as JSON')); }
    return new PromiseCtor(function (resolve, reject) {
      const id = ++nextCall;
      pending.set(id, { resolve: resolve, reject: reject });
      bridge(op, json, id);
    });
  }
  function deliver(id, ok, text) {
    const p = pending.get(id);
    if (p === undefined) return;
    pending.delete(id);
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
  const expose = function (name, value) {
    defineProperty(global, name, { value: value, writable: true, configurable: true, enumerable: false });
  };
  expose('BadRequestError', BadRequestError);
  expose('AuthenticationError', AuthenticationError);
  expose('AuthorizationError', AuthorizationError);
  expose('CustomHttpResponseError', CustomHttpResponseError);
  expose('fetch', fetch);
  expose('console', consoleStub);
  // WebAssembly memory is allocated outside the isolate's heap limit (measured: gigabytes pass
  // through), and shared memory plus Atomics only buy a high-resolution timer here.
  delete global.WebAssembly;
  delete global.SharedArrayBuffer;
  delete global.Atomics;

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

  async function run(factory, input, maxChars) {
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
    return encode(meta, value, maxChars);
  }

  // The host's one handle on this context: run the Reactor (once), or deliver a bridge answer.
  return function (op, a, b, c) {
    if (op === 'deliver') return deliver(a, b, c);
    const factory = global.${FACTORY_GLOBAL};
    delete global.${FACTORY_GLOBAL};
    return run(factory, a, b);
  };
})(globalThis, (function () {
  const b = globalThis.${BRIDGE_GLOBAL};
  delete globalThis.${BRIDGE_GLOBAL};
  return b;
})())
`
