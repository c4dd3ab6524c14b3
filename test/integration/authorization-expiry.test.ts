import t from 'tap'
import { startTestApp } from '../helpers/app.js'
import { testClock } from '../helpers/clock.js'
import { rawRequest } from '../helpers/proxy.js'
import { startStub } from '../helpers/stub-server.js'
import { application, card, VISA } from '../helpers/tokens.js'

// Expiry is checked at use, not only when a key authenticates and not by the sweep: every
// principal below is cached (it acted once) before its Application expires, and each path must
// stop from that instant. The sweep does not run during the test (its period is an hour). The
// app's clock is moved to the instant, so nothing waits for it.

const DETOKENIZE = (id: string) =>
  `module.exports = async (req) => ({ body: { n: await req.svc.detokenize('{{ ${id} | json: "$.number" }}') }, headers: {}, status: 200 })`

t.test('an Application stops acting the instant it expires, on every path', async (t) => {
  const clock = testClock()
  const app = await startTestApp(t, { SVC_REACTOR_TIMEOUT_MS: '5000', SVC_EXPIRY_SWEEP_SECONDS: '3600' }, { clock })
  const stub = await startStub(t)
  const writer = await application(app, { type: 'private', permissions: ['token:create'] })
  const id = (await app.request('POST', '/tokens', { key: writer.key, body: { type: 'card', data: card() } })).body.id as string
  const invoker = await application(app, { type: 'private', permissions: ['token:use'] })

  const soon = new Date(clock() + 60_000)
  const reveal = { type: 'private', rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:use', 'token:read'] }] }
  const actor = await application(app, { ...reveal, expires_at: soon.toISOString() })
  const open = await app.request('POST', '/proxies', { body: { name: 'open', destination_url: stub.origin, require_auth: false, application: { id: actor.id } } })
  const transformed = await app.request('POST', '/proxies', { body: { name: 't', destination_url: stub.origin, application: { id: actor.id }, response_transform: { code: DETOKENIZE(id) } } })
  const session = async (publicKey: string, privateKey: string) => {
    const s = await app.request('POST', '/sessions', { key: publicKey })
    const rules = [{ priority: 1, conditions: [{ attribute: 'id', operator: 'equals', value: id }], transform: 'reveal', permissions: ['token:read'] }]
    const ok = await app.request('POST', '/sessions/authorize', { key: privateKey, body: { nonce: s.body.nonce, rules } })
    if (ok.status !== 200) throw new Error(`authorize: ${ok.status} ${ok.text}`)
    return s.body.session_key as string
  }
  const publicRules = { type: 'public', rules: [{ priority: 1, container: '/', transform: 'redact', permissions: ['token:create'] }] }
  const byExpiringCreator = await session((await application(app, { ...publicRules, expires_at: soon.toISOString() })).key, (await application(app, reveal)).key)
  const byExpiringAuthorizer = await session((await application(app, publicRules)).key, actor.key)

  const paths = {
    'require_auth false proxy key': () =>
      rawRequest(app.url, {
        method: 'POST',
        path: '/proxy',
        headers: ['SVC-PROXY-KEY', open.body.key, 'Content-Type', 'application/json'],
        body: JSON.stringify({ n: `{{ ${id} | json: '$.number' }}` }),
      }).then((r) => ({ status: r.status, text: r.body.toString() })),
    'response transform bridge': () =>
      rawRequest(app.url, { method: 'POST', path: '/proxy', headers: ['SVC-PROXY-KEY', transformed.body.key, 'SVC-API-KEY', invoker.key], body: '' }).then((r) => ({
        status: r.status,
        text: r.body.toString(),
      })),
    'session of an expiring creator': () => app.request('GET', `/tokens/${id}`, { key: byExpiringCreator }),
    'session of an expiring authorizer': () => app.request('GET', `/tokens/${id}`, { key: byExpiringAuthorizer }),
    'its own key': () => app.request('POST', '/detokenize', { key: actor.key, body: { n: `{{ ${id} | json: '$.number' }}` } }),
  }
  for (const [label, call] of Object.entries(paths)) {
    const res = await call()
    t.equal(res.status, 200, `${label}: acts while it lives`)
    t.match(res.text, VISA, `${label}: reveals while it lives`)
  }

  clock.advance(soon.getTime() - clock())
  const forwarded = stub.seen.length
  for (const [label, call] of Object.entries(paths)) {
    const res = await call()
    t.not(res.status, 200, `${label}: refused after expiry (${res.status})`)
    t.ok(res.status === 401 || res.status === 403 || res.status === 500, `${label}: 401, 403, or a failed bridge`)
    t.match(res.text, /expired/, `${label}: says it expired`)
    t.notMatch(res.text, VISA, `${label}: no plaintext`)
  }
  t.equal(stub.seen.length - forwarded, 1, 'only the transformed call reached the destination (its transform then failed); nothing was sent for the open proxy')
  t.notMatch(stub.seen.at(-1)!.body.toString(), VISA)
})

t.test('a key that expires hands out nothing that outlives it: no later Application, no key for a longer-lived one', async (t) => {
  const clock = testClock()
  const app = await startTestApp(t, { SVC_EXPIRY_SWEEP_SECONDS: '3600' }, { clock })
  const soon = new Date(clock() + 60_000)
  const later = new Date(clock() + 120_000)
  const ceiling = [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:read'] }]
  const manage = ['application:create', 'application:read', 'application:update']
  const temporary = await application(app, { type: 'management', permissions: manage, rules: ceiling, expires_at: soon.toISOString() })
  const lasting = await application(app, { type: 'private', rules: ceiling })
  const brief = await application(app, { type: 'private', rules: ceiling, expires_at: soon.toISOString() })

  for (const expires_at of [undefined, later.toISOString()]) {
    const res = await app.request('POST', '/applications', { key: temporary.key, body: { name: 'forever', type: 'management', permissions: manage, rules: ceiling, expires_at } })
    t.equal(res.status, 403, `creating an Application expiring ${expires_at ?? 'never'}`)
    t.match(res.body, { type: '/problems/forbidden', errors: { expires_at: [/no later than/] } })
  }
  const ok = await app.request('POST', '/applications', { key: temporary.key, body: { name: 'brief', type: 'private', rules: ceiling, expires_at: soon.toISOString() } })
  t.equal(ok.status, 201, 'an Application expiring with the key is fine')

  for (const [label, path] of [['an extra key', `/applications/${lasting.id}/keys`], ['a regenerated key', `/applications/${lasting.id}/regenerate`]]) {
    const res = await app.request('POST', path!, { key: temporary.key })
    t.equal(res.status, 403, `${label} for an Application that outlives the key`)
    t.match(res.body.detail, /would outlive the key/)
  }
  t.equal((await app.request('POST', `/applications/${brief.id}/keys`, { key: temporary.key })).status, 201, 'a key for an Application that expires no later is fine')
  t.equal((await app.request('GET', '/tokens', { key: lasting.key })).status, 200, 'the refused regenerate left the key in place')

  const narrow = await application(app, { type: 'private', rules: [{ priority: 1, container: '/general/', transform: 'mask', permissions: ['token:read'] }] })
  const widen = (id: string) => app.request('PUT', `/applications/${id}`, { key: temporary.key, body: { name: 'widened', rules: ceiling } })
  const widened = await widen(narrow.id)
  t.equal(widened.status, 403, 'widening an Application that outlives the key')
  t.match(widened.body, { detail: /would outlive the key/, errors: { id: [/no later than/] } })
  t.match((await app.request('GET', `/applications/${narrow.id}`)).body.rules, [{ container: '/general/' }], 'and it kept its grants')
  const briefNarrow = await application(app, { type: 'private', rules: [{ priority: 1, container: '/general/', transform: 'mask', permissions: ['token:read'] }], expires_at: soon.toISOString() })
  t.equal((await widen(briefNarrow.id)).status, 200, 'widening one that expires no later is fine')
  const narrowed = await app.request('PUT', `/applications/${lasting.id}`, { key: temporary.key, body: { name: 'narrowed', rules: [{ ...ceiling[0], container: '/general/' }] } })
  t.equal(narrowed.status, 200, 'narrowing one that outlives the key is fine: it hands out nothing')

  const proxyManager = await application(app, { type: 'management', permissions: ['proxy:create', 'proxy:update'], rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:use'] }], expires_at: soon.toISOString() })
  const user = await application(app, { type: 'private', rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:use'] }] })
  const open = { name: 'open', destination_url: 'https://example.com', require_auth: false, application: { id: user.id } }
  const refused = await app.request('POST', '/proxies', { key: proxyManager.key, body: open })
  t.equal(refused.status, 403, 'a require_auth false proxy key would act as an Application that outlives the key')
  t.match(refused.body, { errors: { 'application.id': [/no later than/] } })
  t.equal((await app.request('POST', '/proxies', { key: proxyManager.key, body: { ...open, require_auth: true } })).status, 201, 'a proxy that needs its callers\' keys hands out no access')

  // Code acts as its Application for every caller: a Reactor left by an expired key revealed a /pci/ card to a /general/-only caller.
  const transform = { code: 'module.exports = async (req) => req' }
  const coded = await app.request('POST', '/proxies', { key: proxyManager.key, body: { ...open, name: 'coded', require_auth: true, request_transform: transform } })
  t.equal(coded.status, 403, 'a proxy whose transform code would act as an Application that outlives the key')
  t.match(coded.body, { errors: { 'application.id': [/no later than/] } })
  const reactorManager = await application(app, { type: 'management', permissions: ['reactor:create'], rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:use'] }], expires_at: soon.toISOString() })
  const reactor = { name: 'leftover', application: { id: user.id }, code: 'module.exports = async () => ({})' }
  const leftover = await app.request('POST', '/reactors', { key: reactorManager.key, body: reactor })
  t.equal(leftover.status, 403, 'a Reactor that would act as an Application that outlives the key')
  t.match(leftover.body, { errors: { 'application.id': [/no later than/] } })
  const briefUser = await application(app, { type: 'private', rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:use'] }], expires_at: soon.toISOString() })
  t.equal((await app.request('POST', '/reactors', { key: reactorManager.key, body: { ...reactor, application: { id: briefUser.id } } })).status, 201, 'one that expires no later is fine')
})
