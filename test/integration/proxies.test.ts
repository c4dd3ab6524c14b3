import t from 'tap'
import { startTestApp } from '../helpers/app.js'
import { assertProxyError, rawRequest } from '../helpers/proxy.js'
import { startStub } from '../helpers/stub-server.js'
import { appKey } from '../helpers/tokens.js'

const OPERATOR_KEY = 'operator-key-0123456789abcdef0123456789'
const ECHO = 'module.exports = async function (req) { const { args } = req; return { body: args.body, headers: args.headers } }'

t.test('Proxies API: create, list, get, update, delete with validation', async (t) => {
  const app = await startTestApp(t, { SVC_OPERATOR_KEY: OPERATOR_KEY })
  const stub = await startStub(t)
  const actor = await app.request('POST', '/applications', { body: { name: 'proxy actor', type: 'private', permissions: ['token:use', 'token:create'] } })
  const base = { name: 'charges', destination_url: `${stub.origin}/v1` }

  t.test('create returns the key once; list and get never do', async (t) => {
    const created = await app.request('POST', '/proxies', {
      body: { ...base, request_transform: { code: ECHO }, configuration: { A: 'b' }, application: { id: actor.body.id } },
    })
    t.equal(created.status, 201)
    t.match(created.body, {
      id: String,
      key: /^tsr_proxy_[A-Za-z0-9]{43}$/,
      name: 'charges',
      destination_url: `${stub.origin}/v1`,
      request_transform: { code: ECHO },
      configuration: { A: 'b' },
      application: { id: actor.body.id },
      require_auth: true,
      created_at: String,
    })
    t.notOk(created.body.response_transform)
    t.notMatch(created.text, /key_hash/)
    const got = await app.request('GET', `/proxies/${created.body.id}`)
    t.equal(got.status, 200)
    t.equal(got.body.key, undefined, 'get does not return the key')
    t.notMatch(got.text, /key_hash|tsr_proxy_[A-Za-z0-9]{43}/)
    const list = await app.request('GET', '/proxies?size=10')
    t.equal(list.status, 200)
    t.match(list.body.pagination, { total_items: 1, page_number: 1, page_size: 10, total_pages: 1 })
    t.equal(list.body.data[0].id, created.body.id)
    t.equal(list.body.data[0].key, undefined, 'list does not return the key')
    t.notMatch(list.text, new RegExp(created.body.key as string))
    const stored = await app.services.store.proxies.findById(created.body.tenant_id, created.body.id)
    t.not(stored?.key_hash, created.body.key, 'only a hash is stored')
    t.equal(stored?.key_hash, app.services.hasher.hash(created.body.key))
  })

  t.test('require_auth defaults to true and can be turned off', async (t) => {
    const open = await app.request('POST', '/proxies', { body: { ...base, require_auth: false, application: { id: actor.body.id } } })
    t.equal(open.status, 201)
    t.equal(open.body.require_auth, false)
    const noApp = await app.request('POST', '/proxies', { body: { ...base, require_auth: false } })
    t.equal(noApp.status, 400, 'without auth the proxy needs an Application to act as')
    t.ok(noApp.body.errors.application)
  })

  t.test('each rule is a 400 naming its field', async (t) => {
    const cases: [string, object, string][] = [
      ['name missing', { destination_url: base.destination_url }, 'name'],
      ['name empty', { ...base, name: '' }, 'name'],
      ['name too long', { ...base, name: 'n'.repeat(201) }, 'name'],
      ['destination missing', { name: 'x' }, 'destination_url'],
      ['destination not a URL', { ...base, destination_url: 'not a url' }, 'destination_url'],
      ['destination relative', { ...base, destination_url: '/v1/charges' }, 'destination_url'],
      ['destination with userinfo', { ...base, destination_url: 'http://user:pass@127.0.0.1/' }, 'destination_url'],
      ['destination ftp', { ...base, destination_url: 'ftp://example.com/' }, 'destination_url'],
      ['destination with fragment', { ...base, destination_url: `${stub.origin}/#x` }, 'destination_url'],
      ['request_transform without code', { ...base, request_transform: {} }, 'request_transform.code'],
      ['request_transform code empty', { ...base, request_transform: { code: '' } }, 'request_transform.code'],
      ['response_transform not an object', { ...base, response_transform: 'x' }, 'response_transform'],
      ['request_transform code too long', { ...base, request_transform: { code: `// ${'x'.repeat(50_000)}` } }, 'request_transform.code'],
      ['response_transform code too long', { ...base, response_transform: { code: `// ${'x'.repeat(50_000)}` } }, 'response_transform.code'],
      ['configuration not strings', { ...base, configuration: { A: 1 } }, 'configuration.A'],
      ['application not a uuid', { ...base, application: { id: 'nope' } }, 'application.id'],
      ['application unknown', { ...base, application: { id: '00000000-0000-4000-8000-000000000000' } }, 'application.id'],
      ['require_auth not a boolean', { ...base, require_auth: 'yes' }, 'require_auth'],
      ['unknown field', { ...base, extra: 1 }, 'extra'],
    ]
    for (const [label, body, field] of cases) {
      const res = await app.request('POST', '/proxies', { body })
      t.equal(res.status, 400, label)
      t.ok(res.body?.errors?.[field], `${label}: errors.${field} (${JSON.stringify(res.body?.errors)})`)
    }
  })

  t.test('the destination policy applies at save time', async (t) => {
    const strict = await startTestApp(t, { SVC_PROXY_ALLOW_HTTP: 'false', SVC_PROXY_ALLOW_PRIVATE: 'false' })
    for (const url of ['http://example.com/', 'https://127.0.0.1/', 'https://10.0.0.1/', 'https://169.254.169.254/latest', 'https://[::1]/', 'https://[::ffff:127.0.0.1]/']) {
      const res = await strict.request('POST', '/proxies', { body: { name: 'x', destination_url: url } })
      t.equal(res.status, 400, url)
      t.ok(res.body.errors?.destination_url, `${url}: ${JSON.stringify(res.body.errors)}`)
    }
    const ok = await strict.request('POST', '/proxies', { body: { name: 'x', destination_url: 'https://api.example.com/v1' } })
    t.equal(ok.status, 201, 'a public https URL is accepted (DNS is checked at connect time)')
  })

  t.test('code is compiled on save: 422 naming the transform', async (t) => {
    for (const field of ['request_transform', 'response_transform']) {
      const res = await app.request('POST', '/proxies', { body: { ...base, [field]: { code: 'module.exports = async function () {\n  return 1 +* 2\n}' } } })
      t.equal(res.status, 422, field)
      t.match(res.body.detail, /SyntaxError/)
      t.ok(res.body.errors[`${field}.code`], `errors.${field}.code`)
    }
    const created = await app.request('POST', '/proxies', { body: base })
    const bad = await app.request('PUT', `/proxies/${created.body.id}`, { body: { ...base, response_transform: { code: 'module.exports = (' } } })
    t.equal(bad.status, 422, 'on update too')
  })

  t.test('update replaces the proxy; delete removes it', async (t) => {
    const created = await app.request('POST', '/proxies', { body: { ...base, request_transform: { code: ECHO }, configuration: { A: 'b' } } })
    const id = created.body.id
    const updated = await app.request('PUT', `/proxies/${id}`, { body: { name: 'renamed', destination_url: `${stub.origin}/v2`, response_transform: { code: ECHO } } })
    t.equal(updated.status, 200)
    t.match(updated.body, { id, name: 'renamed', destination_url: `${stub.origin}/v2`, response_transform: { code: ECHO }, configuration: {}, require_auth: true })
    t.notOk(updated.body.request_transform, 'a transform left out is removed')
    t.equal(updated.body.key, undefined, 'update does not return the key')
    t.equal((await app.request('GET', `/proxies/${id}`)).body.name, 'renamed')
    t.equal((await app.request('PUT', `/proxies/${id}`, { body: { name: 'x' } })).status, 400)
    t.equal((await app.request('DELETE', `/proxies/${id}`)).status, 204)
    t.equal((await app.request('GET', `/proxies/${id}`)).status, 404)
    t.equal((await app.request('PUT', `/proxies/${id}`, { body: base })).status, 404)
    t.equal((await app.request('DELETE', `/proxies/${id}`)).status, 404)
    t.equal((await app.request('GET', '/proxies/not-a-uuid')).status, 404)
  })

  t.test('permissions: management keys only', async (t) => {
    const priv = await appKey(app, { name: 'p', type: 'private', permissions: ['token:use'] })
    t.equal((await app.request('GET', '/proxies', { key: priv })).status, 403)
    t.equal((await app.request('POST', '/proxies', { key: priv, body: base })).status, 403)
    const readOnly = await appKey(app, { name: 'r', type: 'management', permissions: ['proxy:read'] })
    t.equal((await app.request('GET', '/proxies', { key: readOnly })).status, 200)
    t.equal((await app.request('POST', '/proxies', { key: readOnly, body: base })).status, 403)
    t.equal((await app.request('GET', '/proxies', { key: null })).status, 401)
  })

  t.test('another tenant sees none of it: 404, and its keys cannot use the proxy', async (t) => {
    const created = await app.request('POST', '/proxies', { body: base })
    const other = await app.request('POST', '/tenants', { key: OPERATOR_KEY, body: { name: 'acme' } })
    t.equal(other.status, 201)
    const otherAdmin = other.body.application.key as string
    const id = created.body.id
    t.equal((await app.request('GET', `/proxies/${id}`, { key: otherAdmin })).status, 404)
    t.equal((await app.request('PUT', `/proxies/${id}`, { key: otherAdmin, body: base })).status, 404)
    t.equal((await app.request('DELETE', `/proxies/${id}`, { key: otherAdmin })).status, 404)
    t.equal((await app.request('GET', '/proxies', { key: otherAdmin })).body.pagination.total_items, 0)
    const otherActor = await app.request('POST', '/applications', { key: otherAdmin, body: { name: 'a', type: 'private', permissions: ['token:use'] } })
    const foreignApp = await app.request('POST', '/proxies', { body: { ...base, application: { id: otherActor.body.id } } })
    t.equal(foreignApp.status, 400, "another tenant's Application is unknown here")
    t.ok(foreignApp.body.errors['application.id'])
    const otherCaller = otherActor.body.key as string
    const res = await rawRequest(app.url, { path: '/proxy', headers: ['SVC-PROXY-KEY', created.body.key, 'SVC-API-KEY', otherCaller] })
    assertProxyError(t, res, 403, 'foreign caller')
    const unknown = await rawRequest(app.url, { path: '/proxy', headers: ['SVC-PROXY-KEY', `key_${'x'.repeat(43)}`, 'SVC-API-KEY', otherCaller] })
    assertProxyError(t, unknown, 403, 'unknown key beside a valid caller')
    t.equal(unknown.json.proxy_error.detail, res.json.proxy_error.detail, 'a foreign proxy and no proxy look the same')
  })
})
