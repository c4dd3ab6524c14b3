import t from 'tap'
import { startTestApp } from '../helpers/app.js'
import { appKey, card, createToken } from '../helpers/tokens.js'

t.test('hostile JSON bodies are 400/413 problems and store nothing', async (t) => {
  const app = await startTestApp(t, { SVC_BODY_LIMIT_BYTES: '2048' })
  const valid = JSON.stringify({ name: 'n', type: 'private', permissions: ['token:read'] })
  const deep = '{"name":"n","type":"private","permissions":["token:read"],"rules":' + '['.repeat(70) + ']'.repeat(70) + '}'
  const cases: [string, string | Buffer, number][] = [
    ['invalid UTF-8', Buffer.concat([Buffer.from('{"name":"'), Buffer.from([0xff, 0xfe]), Buffer.from('","type":"private","permissions":["token:read"]}')]), 400],
    ['__proto__ key', '{"name":"n","type":"private","permissions":["token:read"],"__proto__":{"admin":true}}', 400],
    ['constructor key', '{"name":"n","type":"private","permissions":["token:read"],"constructor":{"prototype":{}}}', 400],
    ['nesting deeper than 64', deep, 400],
    ['trailing garbage', valid + 'garbage', 400],
    ['two documents', valid + valid, 400],
    ['not JSON', 'name=n&type=private', 400],
    ['empty body', '', 400],
    ['over the limit', JSON.stringify({ name: 'x'.repeat(4096), type: 'private', permissions: ['token:read'] }), 413],
  ]
  for (const [label, rawBody, status] of cases) {
    const res = await app.request('POST', '/applications', { rawBody, headers: { 'content-type': 'application/json' } })
    t.equal(res.status, status, `${label}: ${status}`)
    t.equal(res.headers.get('content-type'), 'application/problem+json', `${label}: problem+json`)
    t.equal(res.body.status, status)
    t.notMatch(res.text, /garbage|admin|stack|at \w+ \(/, `${label}: no echo of input or stack`)
  }
  const list = await app.request('GET', '/applications')
  t.equal(list.body.pagination.total_items, 1, 'nothing was stored')
  t.equal(Object.getPrototypeOf({}).admin, undefined, 'no prototype pollution')
})

t.test('routing, methods, trace ids, health', async (t) => {
  const app = await startTestApp(t)
  const unknown = await app.request('GET', '/nowhere')
  t.equal(unknown.status, 404)
  t.equal(unknown.headers.get('content-type'), 'application/problem+json')
  const wrongMethod = await app.request('PATCH', '/applications')
  t.equal(wrongMethod.status, 405)
  t.equal(wrongMethod.body.status, 405)
  t.equal(wrongMethod.headers.get('content-type'), 'application/problem+json')
  t.same(wrongMethod.headers.get('allow')?.split(', ').sort(), ['GET', 'HEAD', 'POST'], 'Allow names the methods of the path')
  const unknownMethod = await app.request('PROPFIND', '/applications')
  t.equal(unknownMethod.status, 405)
  t.ok(unknownMethod.headers.get('allow'), 'an unknown method gets the Allow header too')

  const traced = await app.request('GET', '/healthz', { key: null, headers: { 'SVC-TRACE-ID': 'abc-123' } })
  t.equal(traced.headers.get('svc-trace-id'), 'abc-123', 'a caller trace id is echoed')
  const generated = await app.request('GET', '/healthz', { key: null })
  t.match(generated.headers.get('svc-trace-id'), /^[0-9a-f-]{36}$/)
  const unsafe = await app.request('GET', '/healthz', { key: null, headers: { 'SVC-TRACE-ID': 'x'.repeat(500) } })
  t.match(unsafe.headers.get('svc-trace-id'), /^[0-9a-f-]{36}$/, 'an unsafe trace id is replaced')
  const problem = await app.request('GET', '/applications', { key: null, headers: { 'SVC-TRACE-ID': 'trace-1' } })
  t.equal(problem.body.trace_id, 'trace-1')

  t.same((await app.request('GET', '/healthz', { key: null })).body, { status: 'ok' })
  const ready = await app.request('GET', '/readyz', { key: null })
  t.equal(ready.status, 200)
  t.equal(ready.body.components.database, 'ok')
})

t.test('answers that carry data, keys or problems are never stored by a cache', async (t) => {
  const app = await startTestApp(t)
  const created = await app.request('POST', '/applications', { body: { name: 'reader', type: 'private', permissions: ['token:create', 'token:read'] } })
  t.equal(created.status, 201)
  t.ok(created.body.key, 'the answer carries a key')
  const key = await appKey(app, { name: 'reader 2', type: 'private', rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:create', 'token:read'] }] })
  const id = await createToken(app, key, { type: 'card', data: card() })
  const read = await app.request('GET', `/tokens/${id}`, { key })
  t.equal(read.body.data.number, card().number, 'the answer carries plaintext')
  for (const [label, res] of [['a new key', created], ['plaintext', read], ['a problem', await app.request('GET', '/tokens/nope', { key })], ['health', await app.request('GET', '/readyz', { key: null })]] as const) {
    t.equal(res.headers.get('cache-control'), 'no-store', label)
  }
  const asset = await app.request('GET', '/docs/init.js', { key: null })
  t.equal(asset.headers.get('cache-control'), 'public, max-age=3600', 'the docs page assets stay cacheable')
})

t.test('tenant settings', async (t) => {
  const app = await startTestApp(t)
  const self = await app.request('GET', '/tenants/self')
  t.equal(self.status, 200)
  t.match(self.body, { name: 'default', settings: { ephemeral_proxy_enabled: true } })
  const patched = await app.request('PATCH', '/tenants/self', {
    rawBody: JSON.stringify({ settings: { ephemeral_proxy_enabled: false } }),
    headers: { 'content-type': 'application/merge-patch+json' },
  })
  t.equal(patched.status, 200)
  t.equal(patched.body.settings.ephemeral_proxy_enabled, false)
  t.equal((await app.request('GET', '/tenants/self')).body.settings.ephemeral_proxy_enabled, false)
  const wrongType = await app.request('PATCH', '/tenants/self', { rawBody: '{"settings":{}}', headers: { 'content-type': 'text/plain' } })
  t.equal(wrongType.status, 415)
  const plainJson = await app.request('PATCH', '/tenants/self', { body: { settings: { ephemeral_proxy_enabled: true } } })
  t.equal(plainJson.status, 415, 'a merge patch must say so: application/json is 415')
  t.equal((await app.request('GET', '/tenants/self')).body.settings.ephemeral_proxy_enabled, false, 'the 415 changed nothing')
  const mergePatch = { 'content-type': 'application/merge-patch+json' }
  const badValue = await app.request('PATCH', '/tenants/self', { body: { settings: { ephemeral_proxy_enabled: 'no' } }, headers: mergePatch })
  t.equal(badValue.status, 400)
  t.ok(badValue.body.errors['settings.ephemeral_proxy_enabled'])
  const unknownSetting = await app.request('PATCH', '/tenants/self', { body: { settings: { colour: 'red' } }, headers: mergePatch })
  t.equal(unknownSetting.status, 400)
  const reader = await app.request('POST', '/applications', { body: { name: 'r', type: 'management', permissions: ['application:read'] } })
  t.equal((await app.request('GET', '/tenants/self', { key: reader.body.key })).status, 403)
})
