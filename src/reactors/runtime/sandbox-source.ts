/**
 * JavaScript that runs INSIDE each fresh isolate context, before the Reactor's code.
 *
 * It defines the Reactor globals (error classes, `fetch`, a silent `console`) and returns
 * `{ run, deliver }` to the host. The only host object it sees is the bridge callback, an
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

export const MODULE_FILENAME = 'reactor.js'

/** CommonJS-style wrapper; the header sits on its own line so positions match the user's code. */
export function wrapModule(code: string): string {
  return `(function (module, exports) {\n${code}\n})`
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
  const MAX_MESSAGE = 2000;

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
    catch (e) { return PromiseCtor.reject(new TypeError('The argument of ' + op + ' is not serializable as JSON')); }
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

  function messageOf(e) {
    try {
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
      return [stringify({ kind: 'error', code: 'reactor_error', message: 'The Reactor result is not serializable as JSON: ' + messageOf(e) }), ''];
    }
    // UTF-8 needs at least one byte per UTF-16 unit, so this never lets an oversized result out.
    if (m.length + v.length > maxChars) return [stringify({ kind: 'too_large' }), ''];
    return [m, v];
  }

  async function run(factory, input, maxChars) {
    let meta, value;
    try {
      const req = parse(input);
      const module = { exports: {} };
      factory.call(module.exports, module, module.exports);
      const handler = module.exports;
      if (typeof handler !== 'function') throw new TypeError('module.exports must be a function');
      value = await handler({ args: req.args, configuration: req.configuration, svc: svc });
      meta = { kind: 'ok' };
    } catch (e) {
      try { const d = describe(e); meta = d[0]; value = d[1]; }
      catch (_) { meta = { kind: 'error', code: 'reactor_error', message: 'The Reactor threw an unreadable error' }; value = undefined; }
    }
    return encode(meta, value, maxChars);
  }

  return { run: run, deliver: deliver };
})(globalThis, (function () {
  const b = globalThis.${BRIDGE_GLOBAL};
  delete globalThis.${BRIDGE_GLOBAL};
  return b;
})())
`
