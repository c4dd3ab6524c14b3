/**
 * Generated bodies (fast-check) against every JSON route (and generated query strings against
 * every list route): random JSON, and mutations of a valid
 * body that put hostile values into its fields (deep nesting, huge numbers, prototype keys,
 * control characters, lone surrogates, wrong types). Whatever arrives: never a 5xx, never a
 * hang, and a 4xx stores nothing. Seeded, so a failure replays: FUZZ_SEED=<seed> (printed on
 * failure); FUZZ_RUNS sets the runs per route.
 */
import http from 'node:http'
import fc from 'fast-check'
import t from 'tap'
import { startTestApp, type TestApp } from '../helpers/app.js'
import { appKey } from '../helpers/tokens.js'

const SEED = Number(process.env.FUZZ_SEED ?? 20261125)
const RUNS = Number(process.env.FUZZ_RUNS ?? 30)
const HANG_MS = 15_000

/** A fragment written into the body text as is: numbers and escapes JSON.stringify would not produce. */
class Raw {
  constructor(readonly text: string) {}
}

function toJsonText(value: unknown): string {
  if (value instanceof Raw) return value.text
  if (Array.isArray(value)) return `[${value.map(toJsonText).join(',')}]`
  if (value !== null && typeof value === 'object') {
    return `{${Object.entries(value).map(([k, v]) => `${JSON.stringify(k)}:${toJsonText(v)}`).join(',')}}`
  }
  return JSON.stringify(value) ?? 'null'
}

const PROTO_KEYS = ['__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty', 'valueOf', 'isPrototypeOf', '__defineGetter__']
const anyUnit = fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c))
const hostile: fc.Arbitrary<unknown> = fc.oneof(
  fc.jsonValue({ maxDepth: 3 }),
  fc.string({ unit: anyUnit, maxLength: 20 }),
  fc.constantFrom('\u0000', 'a\u0000b', '\ud800', 'x\udfff', '\u0001\u001f\u007f', '{{', '}}', '{{ nope }}', '%00', '..;/', '\r\nX-Evil: 1'),
  fc.constantFrom(...['1e400', '-1e400', '123456789012345678901234567890', '1.7976931348623157e309', '-0', '1e-400', '"\\ud800"', '"\\u0000"', '"\\udc00\\ud800"'].map((s) => new Raw(s))),
  fc.integer({ min: 1, max: 150 }).map((n) => new Raw('['.repeat(n) + ']'.repeat(n))),
  fc.integer({ min: 1, max: 150 }).map((n) => new Raw('{"a":'.repeat(n) + '1' + '}'.repeat(n))),
  fc.array(fc.tuple(fc.constantFrom(...PROTO_KEYS), fc.jsonValue({ maxDepth: 1 })), { minLength: 1, maxLength: 3 }).map((entries) => Object.fromEntries(entries)),
  fc.constantFrom(true, false, null, 0, -1, 2 ** 53 + 1, 1.5, '', 'x'.repeat(1000), [], {}),
  // Valid RFC 3339 that no store holds (a leap second, year 0), and the edges around it.
  fc.constantFrom('2099-06-30T23:59:60Z', '0000-01-01T00:00:00Z', '9999-12-31T23:59:59Z', '2099-02-29T00:00:00Z', '2099-01-01T00:00:00+23:59', '2099-01-01 00:00:00Z'),
)

/** Search queries: real and prototype-named fields, hostile values, broken quoting. */
const SEARCH_FIELDS = ['id', 'type', 'container', 'fingerprint', 'data', 'metadata.k', 'metadata.__proto__', 'metadata.constructor', 'constructor', '__proto__', 'prototype', 'tostring', 'x']
const searchValue = fc.oneof(fc.string({ unit: anyUnit, maxLength: 12 }), fc.constantFrom('token', '"a b"', '"unterminated', '\\', '"\\"', '*', '%', ''))
const searchQuery = fc
  .array(fc.tuple(fc.constantFrom(...SEARCH_FIELDS), searchValue), { maxLength: 4 })
  .map((terms) => terms.map(([field, value]) => `${field}:${value}`).join(' '))
const anyQuery = fc.oneof(searchQuery, fc.string({ unit: anyUnit, maxLength: 30 }))
const searchBody = fc.record({ query: anyQuery, page: fc.oneof(fc.constant(1), hostile), size: fc.oneof(fc.constant(10), hostile) }, { requiredKeys: ['query'] })
const searchBodyV2 = fc.record({ query: anyQuery, start: fc.oneof(fc.string({ maxLength: 40 }), hostile), size: fc.oneof(fc.constant(10), hostile) }, { requiredKeys: [] })

/** A valid body with some fields replaced, dropped, or joined by hostile ones. */
function mutated(template: Record<string, unknown>): fc.Arbitrary<unknown> {
  const fields = Object.keys(template)
  return fc
    .tuple(
      fc.subarray(fields),
      fc.array(hostile, { minLength: fields.length, maxLength: fields.length }),
      fc.option(fc.tuple(fc.oneof(fc.constantFrom(...PROTO_KEYS), fc.string({ unit: anyUnit, maxLength: 8 })), hostile), { nil: undefined }),
      fc.boolean(),
    )
    .map(([changed, values, extra, drop]) => {
      const entries: [string, unknown][] = fields.flatMap((f, i) => (changed.includes(f) ? (drop && i === 0 ? [] : [[f, values[i]] as [string, unknown]]) : [[f, template[f]] as [string, unknown]]))
      if (extra) entries.push(extra)
      return Object.fromEntries(entries)
    })
}

interface Route {
  method: string
  path: string
  key: string
  contentType?: string
  template: Record<string, unknown>
  /** Bodies beyond hostile values and mutations of the template (a search query grammar). */
  more?: fc.Arbitrary<unknown>
  /** What a 4xx must leave unchanged. */
  state(): Promise<string>
}

async function get(app: TestApp, path: string, key: string): Promise<string> {
  const res = await app.request('GET', path, { key })
  return `${res.status} ${res.text}`
}

t.test('every JSON route: no 5xx, no hang, nothing stored on a 4xx', async (t) => {
  const operator = 'o'.repeat(40)
  const app = await startTestApp(t, { SVC_RATE_LIMIT_ENABLED: 'false', SVC_OPERATOR_KEY: operator, SVC_REACTOR_TIMEOUT_MS: '5000' })
  const admin = app.adminKey
  const rules = [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:create', 'token:read', 'token:update', 'token:search', 'token:use'] }]
  const priv = await appKey(app, { name: 'fuzz', type: 'private', rules })
  const pub = await appKey(app, { name: 'fuzz public', type: 'public', rules: [{ priority: 1, container: '/', transform: 'mask', permissions: ['token:create'] }] })
  const token = (await app.request('POST', '/tokens', { key: priv, body: { id: 'fuzz-token', type: 'token', data: { a: 1 }, metadata: { k: 'v' } } })).body.id as string
  const appId = (await app.request('POST', '/applications', { body: { name: 'target', type: 'private', permissions: ['token:read'] } })).body.id as string
  const code = 'module.exports = async (req) => ({ raw: req.args })'
  const reactorId = (await app.request('POST', '/reactors', { body: { name: 'echo', code } })).body.id as string
  const proxyId = (await app.request('POST', '/proxies', { body: { name: 'p', destination_url: 'https://api.example.com' } })).body.id as string
  const nonce = (await app.request('POST', '/sessions', { key: pub })).body.nonce as string

  const tokens = () => get(app, '/tokens?size=100', priv)
  const applications = () => get(app, '/applications?size=100', admin)
  const routes: Route[] = [
    { method: 'POST', path: '/applications', key: admin, template: { name: 'n', type: 'private', permissions: ['token:read'], rules: [] }, state: applications },
    { method: 'PUT', path: `/applications/${appId}`, key: admin, template: { name: 'n', permissions: ['token:read'] }, state: applications },
    { method: 'PATCH', path: '/tenants/self', key: admin, contentType: 'application/merge-patch+json', template: { settings: { ephemeral_proxy_enabled: true } }, state: () => get(app, '/tenants/self', admin) },
    { method: 'POST', path: '/tenants', key: operator, template: { name: 'acme' }, state: applications },
    { method: 'POST', path: '/tokens', key: priv, template: { type: 'token', data: 'x', metadata: { k: 'v' }, containers: ['/general/'] }, state: tokens },
    { method: 'PATCH', path: `/tokens/${token}`, key: priv, contentType: 'application/merge-patch+json', template: { data: { b: 2 }, metadata: { k: 'w' } }, state: tokens },
    { method: 'POST', path: '/tokens/search', key: priv, template: { query: 'type:token', page: 1, size: 10 }, more: searchBody, state: tokens },
    { method: 'POST', path: '/v2/tokens/search', key: priv, template: { query: 'type:token', size: 10 }, more: searchBodyV2, state: tokens },
    { method: 'POST', path: '/tokenize', key: priv, template: { a: 'x', b: { type: 'token', data: 'y' } }, state: tokens },
    { method: 'POST', path: '/detokenize', key: priv, template: { a: `{{ ${token} }}`, b: 'plain' }, state: tokens },
    { method: 'POST', path: '/sessions/authorize', key: priv, template: { nonce, rules: [{ priority: 1, conditions: [{ attribute: 'id', operator: 'equals', value: 'x' }], transform: 'mask', permissions: ['token:read'] }] }, state: tokens },
    { method: 'POST', path: '/reactors', key: admin, template: { name: 'r', code, configuration: { a: 'b' } }, state: () => get(app, '/reactors?size=100', admin) },
    { method: 'PUT', path: `/reactors/${reactorId}`, key: admin, template: { name: 'r', code }, state: () => get(app, `/reactors/${reactorId}`, admin) },
    { method: 'POST', path: `/reactors/${reactorId}/react`, key: priv, template: { args: { a: 1 } }, state: tokens },
    { method: 'POST', path: '/proxies', key: admin, template: { name: 'p', destination_url: 'https://api.example.com', require_auth: true }, state: () => get(app, '/proxies?size=100', admin) },
    { method: 'PUT', path: `/proxies/${proxyId}`, key: admin, template: { name: 'p', destination_url: 'https://api.example.com' }, state: () => get(app, `/proxies/${proxyId}`, admin) },
  ]

  for (const route of routes) {
    t.test(`${route.method} ${route.path.replace(/[0-9a-f-]{36}|fuzz-token/, ':id')}`, async (t) => {
      const body = fc.oneof(hostile, mutated(route.template), ...(route.more ? [route.more] : []))
      let checked = 0
      await fc.assert(
        fc.asyncProperty(body, async (value) => {
          const text = toJsonText(value)
          const before = await route.state()
          const res = await fetch(app.url + route.path, {
            method: route.method,
            headers: { 'SVC-API-KEY': route.key, 'content-type': route.contentType ?? 'application/json' },
            body: text,
            signal: AbortSignal.timeout(HANG_MS),
          })
          const answer = await res.text()
          if (res.status >= 500) throw new Error(`${res.status} for ${text.slice(0, 300)}: ${answer.slice(0, 300)}`)
          if (res.status >= 400) {
            if (!res.headers.get('content-type')?.startsWith('application/problem+json')) throw new Error(`${res.status} without problem+json for ${text.slice(0, 300)}`)
            const after = await route.state()
            if (after !== before) throw new Error(`${res.status} changed stored state for ${text.slice(0, 300)}`)
          }
          checked++
        }),
        { seed: SEED, numRuns: RUNS },
      )
      t.equal(checked, RUNS, `${RUNS} bodies, seed ${SEED}`)
    })
  }
})

/** A query parameter's name or value: hostile text, numbers no store holds, and raw broken percent-encodings. */
const queryPart = fc.oneof(
  fc.string({ unit: anyUnit, maxLength: 12 }).map(encodeURIComponentSafe),
  fc.constantFrom('1e400', 'Infinity', '-1', '0', '0x10', '1.5', '99999999999999999999', '2099-06-30T23:59:60Z', '0000-01-01T00:00:00Z', 'private', 'token'),
  fc.constantFrom('%', '%F', '%FF', '%ED%A0%80', '%C3', '%00', '%E2%82', '%25', '+', '%2B', '%26', '%3D'),
)
const queryName = fc.oneof(fc.constantFrom(...PROTO_KEYS, 'metadata.__proto__', 'metadata.constructor', 'metadata.k', 'page', 'size', 'id', 'type', 'container', 'start', 'cursor', 'from', 'to', 'action', 'outcome', 'application_type'), queryPart)
const queryString = fc.array(fc.tuple(queryName, fc.option(queryPart, { nil: undefined })), { minLength: 1, maxLength: 5 }).map((pairs) => pairs.map(([name, value]) => (value === undefined ? name : `${name}=${value}`)).join('&'))

/** encodeURIComponent, with a lone surrogate (which it refuses) spelled as its CESU-8 bytes, as a client might send it. */
function encodeURIComponentSafe(text: string): string {
  return Array.from(text, (c) => {
    const unit = c.charCodeAt(0)
    if (c.length === 2 || unit < 0xd800 || unit > 0xdfff) return encodeURIComponent(c)
    return [0xe0 | (unit >> 12), 0x80 | ((unit >> 6) & 0x3f), 0x80 | (unit & 0x3f)].map((b) => `%${b.toString(16).toUpperCase()}`).join('')
  }).join('')
}

t.test('every list route: hostile query strings never give a 5xx or a hang, and every 4xx is a problem', async (t) => {
  const app = await startTestApp(t, { SVC_RATE_LIMIT_ENABLED: 'false' })
  const admin = app.adminKey
  const priv = await appKey(app, { name: 'fuzz', type: 'private', permissions: ['token:create', 'token:read', 'token:search'] })
  t.equal((await app.request('POST', '/tokens', { key: priv, body: { type: 'token', data: 'x', metadata: { k: 'v' } } })).status, 201)
  const routes: [string, string][] = [
    ['/tokens', priv],
    ['/v2/tokens', priv],
    ['/applications', admin],
    ['/reactors', admin],
    ['/proxies', admin],
    ['/logs', admin],
    ['/logs/export', admin],
    ['/permissions', admin],
  ]
  for (const [path, key] of routes) {
    t.test(`GET ${path}`, async (t) => {
      let checked = 0
      await fc.assert(
        fc.asyncProperty(queryString, async (query) => {
          // A raw request line: fetch would re-encode what it considers malformed.
          const res = await rawGet(app.url, `${path}?${query}`, key)
          if (res.status >= 500) throw new Error(`${res.status} for ?${query}: ${res.body.slice(0, 300)}`)
          if (res.status >= 400 && !res.contentType.startsWith('application/problem+json')) throw new Error(`${res.status} without problem+json for ?${query}`)
          checked++
        }),
        { seed: SEED, numRuns: RUNS },
      )
      t.equal(checked, RUNS, `${RUNS} query strings, seed ${SEED}`)
    })
  }
})

async function rawGet(base: string, target: string, key: string): Promise<{ status: number; contentType: string; body: string }> {
  const { port } = new URL(base)
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: Number(port), method: 'GET', path: target, headers: { 'SVC-API-KEY': key }, timeout: HANG_MS }, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => (body += chunk))
      res.on('end', () => resolve({ status: res.statusCode ?? 0, contentType: String(res.headers['content-type'] ?? ''), body }))
      res.on('error', reject)
    })
    req.on('timeout', () => req.destroy(new Error(`no answer in ${HANG_MS} ms for ${target}`)))
    req.on('error', reject)
    req.end()
  })
}
