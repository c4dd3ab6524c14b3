import type { Test } from 'tap'
import t from 'tap'
import { startTestApp, type TestApp } from '../helpers/app.js'
import { testClock } from '../helpers/clock.js'
import { application, card, VISA } from '../helpers/tokens.js'
import { startStub } from '../helpers/stub-server.js'
import { rawRequest } from '../helpers/proxy.js'

// The eight escalations of issue 12, each tried as the attacker did against the old main.

const ALL_TOKEN = ['token:create', 'token:read', 'token:update', 'token:search', 'token:delete', 'token:use']

const patch = (app: TestApp, key: string, id: string, body: object) =>
  app.request('PATCH', `/tokens/${id}`, { key, rawBody: JSON.stringify(body), headers: { 'content-type': 'application/merge-patch+json' } })

function assertForbidden(t: Test, res: { status: number; headers: Headers; body: { detail?: string } }, names: RegExp, label: string) {
  t.equal(res.status, 403, `${label}: 403`)
  t.equal(res.headers.get('content-type'), 'application/problem+json', `${label}: problem+json`)
  t.match(res.body.detail, names, `${label}: names what is missing`)
}

t.test('issue 12 escalations', async (t) => {
  const clock = testClock()
  const app = await startTestApp(t, { SVC_REACTOR_TIMEOUT_MS: '3000' }, { clock })
  const writer = await application(app, { type: 'private', rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ALL_TOKEN }] })
  const newCard = async (extra: object = {}) => {
    const res = await app.request('POST', '/tokens', { key: writer.key, body: { type: 'card', data: card(), ...extra } })
    if (res.status !== 201) throw new Error(`token: ${res.status} ${res.text}`)
    return res.body.id as string
  }

  t.test('1. a mask rewrite never reveals data', async (t) => {
    const id = await newCard()
    const updater = await application(app, { type: 'public', rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:update'] }] })
    const res = await patch(app, updater.key, id, { mask: { number: '{{ data.number }}', cvc: '{{ data.cvc }}' } })
    assertForbidden(t, res, /mask.*reveal/, 'public token:update')
    t.notMatch(res.text, VISA)
    const maskReader = await application(app, { type: 'private', rules: [{ priority: 1, container: '/', transform: 'mask', permissions: ['token:read'] }] })
    const read = await app.request('GET', `/tokens/${id}`, { key: maskReader.key })
    t.equal(read.body.data.number, 'XXXXXXXXXXXX4242', 'the stored mask is unchanged')
    const revealing = await patch(app, writer.key, id, { mask: { number: '{{ data.number }}' } })
    t.equal(revealing.status, 400, 'even with reveal, a card mask shows at most the first 6 and last 4')
    t.match(revealing.body.errors.mask, [/first 6 and the last 4/])
    const cvc = await app.request('POST', '/tokens', { key: writer.key, body: { type: 'card', data: card(), mask: '{{ data.cvc }}' } })
    t.equal(cvc.status, 400, 'never the CVC, not even at create')
    const dataOnly = await patch(app, updater.key, id, { data: { ...card(), cvc: '999' } })
    t.equal(dataOnly.status, 200, 'a write-only key may still update data')
    t.notOk('data' in dataOnly.body, 'but the answer does not echo the merged data back')
    t.notMatch(dataOnly.text, VISA)
  })

  t.test('2. a session never holds more than its authorizer', async (t) => {
    const id = await newCard()
    const publicApp = await application(app, { type: 'public', rules: [{ priority: 1, container: '/', transform: 'redact', permissions: ['token:create'] }] })
    const authorizer = await application(app, { type: 'private', rules: [{ priority: 1, container: '/general/', transform: 'mask', permissions: ['token:read'] }] })
    const session = await app.request('POST', '/sessions', { key: publicApp.key })
    const grant = { nonce: session.body.nonce, rules: [{ priority: 1, conditions: [{ attribute: 'container', operator: 'starts_with', value: '/' }], transform: 'reveal', permissions: ['token:read'] }] }
    const res = await app.request('POST', '/sessions/authorize', { key: authorizer.key, body: grant })
    assertForbidden(t, res, /token:read with reveal/, 'wider session grant')
    t.ok(res.body.errors['rules[0]'], 'the too-wide rule is named')
    const key = session.body.session_key
    t.equal((await app.request('GET', `/tokens/${id}`, { key })).status, 403, 'GET')
    t.equal((await app.request('GET', '/tokens', { key })).status, 403, 'list')
    t.equal((await app.request('POST', '/detokenize', { key, body: { n: `{{ ${id} }}` } })).status, 403, 'detokenize')
  })

  t.test('3. management sub-permissions do not escalate', async (t) => {
    // Its own app: on the old main this test takes over the root key.
    const app = await startTestApp(t)
    const updater = await application(app, { type: 'management', permissions: ['application:update', 'application:read'] })
    const self = await app.request('PUT', `/applications/${updater.id}`, { key: updater.key, body: { name: 'me', permissions: ['application:update', 'application:create'] } })
    assertForbidden(t, self, /own grants/, 'granting itself more')
    const root = await app.request('GET', '/applications/key')
    assertForbidden(t, await app.request('POST', `/applications/${root.body.id}/regenerate`, { key: updater.key }), /reaches further/, "regenerating the root's key")
    t.equal((await app.request('GET', '/applications/key')).status, 200, 'the root key still works')

    const creator = await application(app, { type: 'management', permissions: ['application:create'] })
    const reveal = await app.request('POST', '/applications', { key: creator.key, body: { name: 'x', type: 'private', rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:read'] }] } })
    assertForbidden(t, reveal, /token:read/, 'creating a reveal Application')
    t.equal((await app.request('GET', '/applications?size=100')).body.data.filter((a: { name: string }) => a.name === 'x').length, 0, 'nothing stored')

    const stub = await startStub(t)
    const revealer = await application(app, { type: 'private', rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:use'] }] })
    const proxyMaker = await application(app, { type: 'management', permissions: ['proxy:create'] })
    const before = (await app.request('GET', '/proxies')).body.pagination.total_items
    const proxy = await app.request('POST', '/proxies', {
      key: proxyMaker.key,
      body: { name: 'open', destination_url: stub.origin, require_auth: false, application: { id: revealer.id } },
    })
    assertForbidden(t, proxy, /bound Application/, 'binding a reveal Application to an open proxy')
    t.ok(proxy.body.errors['application.id'])
    t.equal((await app.request('GET', '/proxies')).body.pagination.total_items, before, 'nothing stored')
    t.equal(stub.seen.length, 0)
  })

  t.test('4. adding containers needs the permission on every one', async (t) => {
    const id = await newCard()
    const pciUpdater = await application(app, { type: 'private', rules: [{ priority: 1, container: '/pci/', transform: 'reveal', permissions: ['token:update', 'token:read'] }] })
    const res = await patch(app, pciUpdater.key, id, { containers: ['/pci/high/', '/general/'] })
    assertForbidden(t, res, /token:update on container \/general\//, 'adding /general/')
    const generalReader = await application(app, { type: 'private', rules: [{ priority: 1, container: '/general/', transform: 'reveal', permissions: ['token:read'] }] })
    t.equal((await app.request('GET', `/tokens/${id}`, { key: generalReader.key })).status, 403, 'the /general/ reader still cannot read it')

    const publicKey = await application(app, { type: 'public', rules: [{ priority: 1, container: '/general/', transform: 'redact', permissions: ['token:create'] }] })
    const sneaky = await app.request('POST', '/tokens', { key: publicKey.key, body: { type: 'card', data: card(), containers: ['/general/', '/pci/high/'] } })
    assertForbidden(t, sneaky, /token:create on container \/pci\/high\//, 'creating inside /pci/high/')
    const tokenize = await app.request('POST', '/tokenize', { key: publicKey.key, body: { c: { type: 'card', data: card(), containers: ['/general/', '/pci/high/'] } } })
    t.equal(tokenize.status, 403, 'nor through /tokenize')
  })

  t.test('5. sessions end with the Applications behind them', async (t) => {
    const id = await newCard()
    const open = async (publicKey: string, privateKey: string) => {
      const s = await app.request('POST', '/sessions', { key: publicKey })
      const rules = [{ priority: 1, conditions: [{ attribute: 'id', operator: 'equals', value: id }], transform: 'reveal', permissions: ['token:read'] }]
      const ok = await app.request('POST', '/sessions/authorize', { key: privateKey, body: { nonce: s.body.nonce, rules } })
      t.equal(ok.status, 200, 'authorized')
      const read = await app.request('GET', `/tokens/${id}`, { key: s.body.session_key })
      t.same(read.body.data, card(), 'reads while both stand')
      return s.body.session_key as string
    }
    const pub = () => application(app, { type: 'public', rules: [{ priority: 1, container: '/', transform: 'redact', permissions: ['token:create'] }] })
    const priv = () => application(app, { type: 'private', rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:read'] }] })
    for (const [label, end] of [
      ['deleting the public creator', (p: { id: string }) => app.request('DELETE', `/applications/${p.id}`)],
      ['regenerating the public creator', (p: { id: string }) => app.request('POST', `/applications/${p.id}/regenerate`)],
    ] as const) {
      const p = await pub()
      const key = await open(p.key, (await priv()).key)
      await end(p)
      t.equal((await app.request('GET', `/tokens/${id}`, { key })).status, 401, label)
    }
    for (const [label, end] of [
      ['deleting the private authorizer', (a: { id: string }) => app.request('DELETE', `/applications/${a.id}`)],
      ['regenerating the private authorizer', (a: { id: string }) => app.request('POST', `/applications/${a.id}/regenerate`)],
    ] as const) {
      const a = await priv()
      const key = await open((await pub()).key, a.key)
      await end(a)
      t.equal((await app.request('GET', `/tokens/${id}`, { key })).status, 401, label)
    }
    const narrowedCreator = await pub()
    const creatorKey = await open(narrowedCreator.key, (await priv()).key)
    const narrower = [{ priority: 1, container: '/general/', transform: 'redact', permissions: ['token:create'] }]
    t.equal((await app.request('PUT', `/applications/${narrowedCreator.id}`, { body: { name: 'n', rules: narrower } })).status, 200)
    t.equal((await app.request('GET', `/tokens/${id}`, { key: creatorKey })).status, 401, 'narrowing the public creator ends its sessions')
    const renamed = await pub()
    const renamedKey = await open(renamed.key, (await priv()).key)
    await app.request('PUT', `/applications/${renamed.id}`, { body: { name: 'renamed', rules: [{ priority: 1, container: '/', transform: 'redact', permissions: ['token:create'] }] } })
    t.equal((await app.request('GET', `/tokens/${id}`, { key: renamedKey })).status, 200, 'renaming it with the same grants does not')
    const narrowed = await priv()
    const key = await open((await pub()).key, narrowed.key)
    await app.request('PUT', `/applications/${narrowed.id}`, { body: { name: 'n', rules: [{ priority: 1, container: '/', transform: 'mask', permissions: ['token:read'] }] } })
    const read = await app.request('GET', `/tokens/${id}`, { key })
    t.equal(read.body.data.number, 'XXXXXXXXXXXX4242', 'narrowing the authorizer narrows the session at once')
  })

  t.test('6. an expired Application no longer acts through a Reactor', async (t) => {
    const id = await newCard()
    const caller = await application(app, { type: 'private', permissions: ['token:use'] })
    const soon = new Date(clock() + 60_000).toISOString()
    const actor = await application(app, { type: 'private', expires_at: soon, rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:use', 'token:create'] }] })
    const reactor = await app.request('POST', '/reactors', {
      body: { name: 'leak', code: `module.exports = async (req) => ({ raw: await req.svc.detokenize('{{ ${id} | json: "$.number" }}') })`, application: { id: actor.id } },
    })
    const react = () => app.request('POST', `/reactors/${reactor.body.id}/react`, { key: caller.key, body: { args: {} } })
    t.equal((await react()).body.raw, VISA, 'acts while it lives')
    clock.advance(60_000)
    const after = await react()
    t.equal(after.status, 500, 'the bridge call fails inside the Reactor, from the instant it expires, before any sweep')
    t.match(after.body.detail, /expired/)
    t.notMatch(after.text, VISA)
  })

  t.test('7. search shows no more than read', async (t) => {
    await newCard({ metadata: { case: 'seven' } })
    const key = (
      await application(app, {
        type: 'private',
        rules: [
          { priority: 1, container: '/pci/', transform: 'redact', permissions: ['token:read', 'token:use'] },
          { priority: 2, container: '/', transform: 'reveal', permissions: ['token:read', 'token:use', 'token:search'] },
        ],
      })
    ).key
    const res = await app.request('POST', '/tokens/search', { key, body: { query: 'metadata.case:seven' } })
    t.equal(res.status, 200)
    t.equal(res.body.pagination.total_items, 1)
    t.notOk('data' in res.body.data[0], 'no data where read redacts')
    t.notOk('fingerprint' in res.body.data[0], 'nor the fingerprint')
    t.notMatch(res.text, VISA)
  })

  t.test('8. deduplication is no oracle', async (t) => {
    const existing = await app.request('POST', '/tokens', { key: writer.key, body: { type: 'card', data: card('4000056655665556'), expires_at: '2099-01-01T00:00:00.000Z' } })
    const publicKey = await application(app, { type: 'public', rules: [{ priority: 1, container: '/pci/', transform: 'mask', permissions: ['token:create'] }] })
    // Asking for a shorter life than the stored token's, which deduplication would otherwise give.
    const body = { type: 'card', data: card('4000056655665556'), deduplicate_token: true, expires_at: '2098-01-01T00:00:00.000Z' }
    const res = await app.request('POST', '/tokens', { key: publicKey.key, body })
    t.equal(res.status, 201)
    t.not(res.body.id, existing.body.id, 'a new token, not the existing one')
    t.equal(res.body.expires_at, body.expires_at, "nor the existing token's expiry")
    const again = await app.request('POST', '/tokens', { key: writer.key, body })
    t.equal(again.body.id, existing.body.id, 'a caller who may read it gets the existing token')
  })
})

t.test('a pre-configured proxy key reaches no more than its bound Application', async (t) => {
  const app = await startTestApp(t)
  const stub = await startStub(t)
  const writer = await application(app, { type: 'private', permissions: ['token:create'] })
  const tok = await app.request('POST', '/tokens', { key: writer.key, body: { type: 'card', data: card() } })
  const limited = await application(app, { type: 'private', rules: [{ priority: 1, container: '/general/', transform: 'reveal', permissions: ['token:use'] }] })
  const ceiling = await application(app, { type: 'management', permissions: ['proxy:create'], rules: [{ priority: 1, container: '/general/', transform: 'reveal', permissions: ['token:use'] }] })
  const proxy = await app.request('POST', '/proxies', { key: ceiling.key, body: { name: 'p', destination_url: stub.origin, require_auth: false, application: { id: limited.id } } })
  t.equal(proxy.status, 201, 'binding within the ceiling is allowed')
  const res = await rawRequest(app.url, {
    method: 'POST',
    path: '/proxy',
    headers: ['SVC-PROXY-KEY', proxy.body.key, 'Content-Type', 'application/json'],
    body: JSON.stringify({ n: `{{ ${tok.body.id} | json: '$.number' }}` }),
  })
  t.equal(res.status, 403, 'the card is outside the bound Application')
  t.equal(stub.seen.length, 0, 'nothing forwarded')
})
