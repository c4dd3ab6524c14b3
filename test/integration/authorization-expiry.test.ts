import t from 'tap'
import { startTestApp, type TestApp } from '../helpers/app.js'
import { rawRequest } from '../helpers/proxy.js'
import { startStub } from '../helpers/stub-server.js'
import { card, VISA } from '../helpers/tokens.js'

// Expiry is checked at use, not only when a key authenticates and not by the sweep: every
// principal below is cached (it acted once) before its Application expires, and each path must
// stop from that instant. The sweep does not run during the test (its period is an hour).

async function application(app: TestApp, body: object): Promise<{ id: string; key: string }> {
  const res = await app.request('POST', '/applications', { body: { name: 'app', ...body } })
  if (res.status !== 201) throw new Error(`creating an Application failed: ${res.status} ${res.text}`)
  return { id: res.body.id, key: res.body.key }
}

const DETOKENIZE = (id: string) =>
  `module.exports = async (req) => ({ body: { n: await req.svc.detokenize('{{ ${id} | json: "$.number" }}') }, headers: {}, status: 200 })`

t.test('an Application stops acting the instant it expires, on every path', async (t) => {
  const app = await startTestApp(t, { SVC_REACTOR_TIMEOUT_MS: '5000', SVC_EXPIRY_SWEEP_SECONDS: '3600' })
  const stub = await startStub(t)
  const writer = await application(app, { type: 'private', permissions: ['token:create'] })
  const id = (await app.request('POST', '/tokens', { key: writer.key, body: { type: 'card', data: card() } })).body.id as string
  const invoker = await application(app, { type: 'private', permissions: ['token:use'] })
  // Start the Reactor runtime before the clock runs: its first start is not what is measured.
  const warm = await app.request('POST', '/proxies', { body: { name: 'warm', destination_url: stub.origin, response_transform: { code: 'module.exports = async (req) => req.args' } } })
  await rawRequest(app.url, { method: 'POST', path: '/proxy', headers: ['SVC-PROXY-KEY', warm.body.key, 'SVC-API-KEY', invoker.key], body: '' })

  const soon = new Date(Date.now() + 4000)
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
  if (Date.now() >= soon.getTime()) return void t.fail('set-up took longer than the expiry; nothing was measured')

  await new Promise((r) => setTimeout(r, soon.getTime() - Date.now() + 50))
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
