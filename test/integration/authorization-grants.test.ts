import t from 'tap'
import { startTestApp, type TestApp } from '../helpers/app.js'
import { application, card, VISA } from '../helpers/tokens.js'

// Handing out grants: ceilings of management keys, Application changes, bindings, sessions;
// 403 naming the excess, 400 for malformed grants, and nothing stored either way.

const GENERAL_REVEAL = [{ priority: 1, container: '/general/', transform: 'reveal', permissions: ['token:read', 'token:use'] }]
const PCI_REVEAL = [{ priority: 1, container: '/pci/', transform: 'reveal', permissions: ['token:read', 'token:use'] }]

async function create(app: TestApp, body: object, key?: string) {
  return app.request('POST', '/applications', { key, body: { name: 'g', ...body } })
}

const created = application

t.test('grants', async (t) => {
  const app = await startTestApp(t, { SVC_OPERATOR_KEY: 'operator-key-0123456789abcdef0123456789' })
  const admin = await app.request('GET', '/applications/key')
  const mgmt = await created(app, { type: 'management', permissions: ['application:create', 'application:read', 'application:update', 'application:delete'], rules: GENERAL_REVEAL })

  t.test('the bootstrap Application and new tenants hold the full ceiling', async (t) => {
    t.match(admin.body.rules, [{ container: '/', transform: 'reveal', permissions: ['token:create', 'token:update', 'token:read', 'token:search', 'token:delete', 'token:use'] }])
    const tenant = await app.request('POST', '/tenants', { key: 'operator-key-0123456789abcdef0123456789', body: { name: 'second' } })
    t.same(tenant.body.application.rules, admin.body.rules)
    const listed = await app.request('GET', '/permissions?application_type=private')
    t.match(listed.body.find((p: { type: string }) => p.type === 'token:read'), { ceiling_application_types: ['management'], operations: ['GET /tokens', 'GET /v2/tokens', 'GET /tokens/{id}', 'POST /detokenize'] })
  })

  t.test('a management key creates only within its ceiling', async (t) => {
    t.equal((await create(app, { type: 'private', rules: GENERAL_REVEAL }, mgmt.key)).status, 201)
    t.equal((await create(app, { type: 'private', rules: [{ ...GENERAL_REVEAL[0], container: '/general/x/', transform: 'mask' }] }, mgmt.key)).status, 201, 'narrower')
    const wider = await create(app, { type: 'private', name: 'wider', rules: [GENERAL_REVEAL[0], { ...PCI_REVEAL[0], priority: 2 }] }, mgmt.key)
    t.equal(wider.status, 403)
    t.same(Object.keys(wider.body.errors), ['rules[1]'], 'names the rule that reaches too far')
    t.match(wider.body.errors['rules[1]'], [/token:read with reveal .*priority 2 on \/pci\/.*you hold no token:read there/])
    const plainUse = await create(app, { type: 'private', name: 'wider', permissions: ['token:use'] }, mgmt.key)
    t.equal(plainUse.status, 403, 'plain token:use reveals on every container')
    t.equal((await create(app, { type: 'management', name: 'wider', permissions: ['proxy:create'] }, mgmt.key)).status, 403, 'a management permission it lacks')
    const malformed = await create(app, { type: 'private', name: 'wider', rules: [{ priority: 0, container: 'pci', transform: 'x', permissions: ['token:read'] }] }, mgmt.key)
    t.equal(malformed.status, 400, 'a malformed grant is a 400, not a 403')
    const names = (await app.request('GET', '/applications?size=100')).body.data.map((a: { name: string }) => a.name)
    t.notOk(names.includes('wider'), 'nothing refused was stored')
  })

  t.test('changing, regenerating or deleting needs the target within the caller', async (t) => {
    const wide = await created(app, { type: 'private', rules: PCI_REVEAL })
    for (const [label, res] of [
      ['update', await app.request('PUT', `/applications/${wide.id}`, { key: mgmt.key, body: { name: 'narrowed', rules: GENERAL_REVEAL } })],
      ['regenerate', await app.request('POST', `/applications/${wide.id}/regenerate`, { key: mgmt.key })],
      ['delete', await app.request('DELETE', `/applications/${wide.id}`, { key: mgmt.key })],
    ] as const) {
      t.equal(res.status, 403, label)
      t.ok(res.body.errors.id, `${label}: names the target`)
    }
    const still = await app.request('GET', `/applications/${wide.id}`)
    t.same(still.body.rules, PCI_REVEAL, 'unchanged')
    t.equal((await app.request('POST', '/detokenize', { key: wide.key, body: {} })).status, 200, 'its key still works')
    const own = await app.request('PUT', `/applications/${mgmt.id}`, { key: mgmt.key, body: { name: 'renamed', permissions: ['application:create', 'application:read', 'application:update', 'application:delete'], rules: GENERAL_REVEAL } })
    t.equal(own.status, 200, 'renaming itself with the same grants is fine')
    const narrower = await app.request('PUT', `/applications/${mgmt.id}`, { key: mgmt.key, body: { name: 'renamed', permissions: ['application:read'] } })
    t.equal(narrower.status, 403, 'but not changing its own grants, even narrower')
    t.equal((await app.request('POST', `/applications/${mgmt.id}/regenerate`, { key: mgmt.key })).status, 200, 'it may rotate its own key')
  })

  t.test('binding an Application to a Reactor or a proxy', async (t) => {
    const binder = await created(app, { type: 'management', permissions: ['reactor:create', 'reactor:update', 'reactor:delete', 'proxy:create', 'proxy:update', 'proxy:delete'], rules: GENERAL_REVEAL })
    const wide = await created(app, { type: 'private', rules: PCI_REVEAL })
    const narrow = await created(app, { type: 'private', rules: GENERAL_REVEAL })
    const code = 'module.exports = async () => ({ raw: 1 })'
    const refused = await app.request('POST', '/reactors', { key: binder.key, body: { name: 'r', code, application: { id: wide.id } } })
    t.equal(refused.status, 403)
    t.ok(refused.body.errors['application.id'])
    t.equal((await app.request('POST', '/reactors', { key: binder.key, body: { name: 'r', code, application: { id: narrow.id } } })).status, 201)
    const rootReactor = await app.request('POST', '/reactors', { body: { name: 'root', code, application: { id: wide.id } } })
    t.equal((await app.request('PUT', `/reactors/${rootReactor.body.id}`, { key: binder.key, body: { name: 'r', code: 'module.exports = async (req) => ({ raw: await req.svc.detokenize(req.args.x) })' } })).status, 403, 'no new code under a wider Application')
    t.equal((await app.request('DELETE', `/reactors/${rootReactor.body.id}`, { key: binder.key })).status, 403)
    t.equal((await app.request('GET', `/reactors/${rootReactor.body.id}`)).body.code, code, 'unchanged')
    const proxy = { name: 'p', destination_url: 'https://example.com', require_auth: false }
    t.equal((await app.request('POST', '/proxies', { key: binder.key, body: { ...proxy, application: { id: wide.id } } })).status, 403)
    t.equal((await app.request('POST', '/proxies', { key: binder.key, body: { ...proxy, application: { id: narrow.id } } })).status, 201)
    const rootProxy = await app.request('POST', '/proxies', { body: { ...proxy, application: { id: wide.id } } })
    t.equal((await app.request('PUT', `/proxies/${rootProxy.body.id}`, { key: binder.key, body: { ...proxy, application: { id: narrow.id } } })).status, 403)
    t.equal((await app.request('DELETE', `/proxies/${rootProxy.body.id}`, { key: binder.key })).status, 403)
  })

  t.test('management keys never act on tokens with their ceiling', async (t) => {
    const res = await app.request('GET', '/tokens')
    t.equal(res.status, 403)
    t.match(res.body.detail, /only as a ceiling/)
  })
})

t.test('answers and data-derived views', async (t) => {
  const app = await startTestApp(t)
  const reveal = await created(app, { type: 'private', rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:create', 'token:read', 'token:update', 'token:use'] }] })
  const maskOnly = await created(app, { type: 'private', rules: [{ priority: 1, container: '/', transform: 'mask', permissions: ['token:create', 'token:read', 'token:update'] }] })
  const publicKey = await created(app, { type: 'public', rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:create', 'token:update'] }] })
  const patch = (key: string, id: string, body: object) =>
    app.request('PATCH', `/tokens/${id}`, { key, rawBody: JSON.stringify(body), headers: { 'content-type': 'application/merge-patch+json' } })

  const made = await app.request('POST', '/tokens', { key: publicKey.key, body: { type: 'card', data: card(), search_indexes: ['{{ data.number | last4 }}'] } })
  t.equal(made.status, 201)
  t.notOk('data' in made.body, 'a key without token:read gets no data back, not even what it sent')
  t.notOk('fingerprint' in made.body)
  const id = made.body.id
  const tokenized = await app.request('POST', '/tokenize', { key: publicKey.key, body: { c: { type: 'card', data: card() } } })
  t.notOk('data' in tokenized.body.c, 'nor from /tokenize')

  const views: [string, unknown][] = [
    ['mask', { last4: '{{ data.number | last4 }}' }],
    ['fingerprint_expression', '{{ data.number }}:{{ data.expiration_year }}'],
    ['search_indexes', ['{{ data.number | slice: 0, 6 }}']],
  ]
  for (const [field, next] of views) {
    const refused = await patch(maskOnly.key, id, { [field]: next })
    t.equal(refused.status, 403, `${field}: needs reveal`)
    t.ok(refused.body.errors[field], `${field}: named`)
    t.equal((await patch(reveal.key, id, { [field]: next })).status, 200, `${field}: with reveal`)
  }
  t.equal((await patch(maskOnly.key, id, { mask: { last4: '{{ data.number | last4 }}' } })).status, 200, 'sending the stored value unchanged is no change')
  const masked = await patch(maskOnly.key, id, { metadata: { k: 'v' } })
  t.same(masked.body.data, { last4: '4242' }, 'a PATCH answer shows what the caller may read')
  t.equal((await app.request('POST', '/tokens/search', { key: reveal.key, body: { query: 'data:424242' } })).status, 403, 'the reveal key holds no search')

  const actor = await created(app, { type: 'private', rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:create', 'token:read'] }] })
  const reactor = await app.request('POST', '/reactors', { body: { name: 't', code: 'module.exports = async (req) => ({ tokenize: { type: "card", data: req.args.c } })', application: { id: actor.id } } })
  const caller = await created(app, { type: 'private', rules: [{ priority: 1, container: '/', transform: 'mask', permissions: ['token:use', 'token:read'] }] })
  const res = await app.request('POST', `/reactors/${reactor.body.id}/react`, { key: caller.key, body: { args: { c: card() } } })
  t.equal(res.status, 200)
  t.same(res.body.tokens.data, { number: 'XXXXXXXXXXXX4242', expiration_month: 12, expiration_year: 2030 }, "a Reactor's tokenize answer shows no more than its caller may read")
  t.notMatch(res.text, VISA)
})
