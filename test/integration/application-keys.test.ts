import { BasisTheoryClient } from '@basis-theory/node-sdk'
import t from 'tap'
import { startTestApp, type TestApp } from '../helpers/app.js'
import { appKey, card } from '../helpers/tokens.js'
import { eventually } from '../helpers/wait.js'

const MISSING = '00000000-0000-4000-8000-000000000000'

async function createApp(app: TestApp, body: Record<string, unknown>, key?: string): Promise<{ id: string; key: string }> {
  const res = await app.request('POST', '/applications', { key, body: { name: 'keys', ...body } })
  if (res.status !== 201) throw new Error(`create Application: ${res.status} ${res.text}`)
  return res.body as { id: string; key: string }
}

// One app for the single-process checks (each uses Applications of its own): PGlite boots are slow.
const app = await startTestApp(t)

const reader = { type: 'private', rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:read'] }] }

t.test('extra Application keys: create, use, list, get, delete', async (t) => {
  const writer = await appKey(app, { type: 'private', permissions: ['token:create'] })
  const token = (await app.request('POST', '/tokens', { key: writer, body: { type: 'card', data: card() } })).body.id as string
  const target = await createApp(app, reader)

  const created = await app.request('POST', `/applications/${target.id}/keys`)
  t.equal(created.status, 201)
  t.match(created.body, { id: String, key: /^tsr_priv_/, created_at: /^\d{4}-\d\d-\d\dT/ })
  const extra = created.body as { id: string; key: string }
  t.equal((await app.request('GET', `/tokens/${token}`, { key: extra.key })).body.data?.number, card().number, 'the extra key acts as its Application')
  t.equal((await app.request('GET', `/tokens/${token}`, { key: target.key })).status, 200, 'the own key still works beside it')
  t.equal((await app.request('GET', '/applications/key', { key: (await createApp(app, { type: 'management', permissions: ['application:read'] })).key })).status, 200)

  const list = await app.request('GET', `/applications/${target.id}/keys`)
  t.equal(list.status, 200)
  t.same(list.body.map((k: { id: string }) => k.id), [extra.id])
  t.notOk('key' in list.body[0], 'a list never shows the key')
  const got = await app.request('GET', `/applications/${target.id}/keys/${extra.id}`)
  t.equal(got.status, 200)
  t.notOk('key' in got.body, 'a get never shows the key')
  t.notOk(JSON.stringify([list.body, got.body]).includes(extra.key))

  // Rotation: the own key regenerated leaves the extra key alone.
  t.equal((await app.request('POST', `/applications/${target.id}/regenerate`)).status, 200)
  t.equal((await app.request('GET', `/tokens/${token}`, { key: extra.key })).status, 200, 'extra key survives regenerate')

  t.equal((await app.request('DELETE', `/applications/${target.id}/keys/${extra.id}`)).status, 204)
  t.equal((await app.request('GET', `/tokens/${token}`, { key: extra.key })).status, 401, 'a deleted key is refused at once')
  t.equal((await app.request('GET', `/applications/${target.id}/keys/${extra.id}`)).status, 404)
  t.equal((await app.request('DELETE', `/applications/${target.id}/keys/${extra.id}`)).status, 404)
})

t.test('an idempotent replay of a key create never hands the key out again', async (t) => {
  const target = await createApp(app, reader)
  const headers = { 'SVC-IDEMPOTENCY-KEY': 'mint-1' }
  const first = await app.request('POST', `/applications/${target.id}/keys`, { headers })
  t.equal(first.status, 201)
  t.match(first.body.key, /^tsr_priv_/)
  const replay = await app.request('POST', `/applications/${target.id}/keys`, { headers })
  t.equal(replay.status, 201)
  t.equal(replay.body.id, first.body.id, 'the same key, not a second one')
  t.notOk('key' in replay.body)
  t.notOk(replay.text.includes(first.body.key as string))
  t.equal((await app.request('GET', `/applications/${target.id}/keys`)).body.length, 1)
})

t.test('bad and foreign ids are 404 problems', async (t) => {
  const target = await createApp(app, reader)
  const other = await createApp(app, reader)
  const otherKey = (await app.request('POST', `/applications/${other.id}/keys`)).body.id as string
  const cases: [string, string][] = [
    ['GET', `/applications/not-a-uuid/keys`],
    ['POST', `/applications/not-a-uuid/keys`],
    ['GET', `/applications/${MISSING}/keys`],
    ['POST', `/applications/${MISSING}/keys`],
    ['GET', `/applications/${target.id}/keys/not-a-uuid`],
    ['DELETE', `/applications/${target.id}/keys/not-a-uuid`],
    ['GET', `/applications/${target.id}/keys/${MISSING}`],
    ['GET', `/applications/${target.id}/keys/${otherKey}`],
    ['DELETE', `/applications/${target.id}/keys/${otherKey}`],
  ]
  for (const [method, path] of cases) {
    const res = await app.request(method, path)
    t.equal(res.status, 404, `${method} ${path}`)
    t.match(res.headers.get('content-type'), /application\/problem\+json/)
  }
  t.equal((await app.request('GET', `/applications/${other.id}/keys/${otherKey}`)).status, 200, 'a key of another Application is still there')
  t.equal((await app.request('PUT', `/applications/${target.id}/keys`)).status, 405)
})

t.test('at most 10 extra keys per Application: 409', async (t) => {
  const target = await createApp(app, reader)
  const made = await Promise.all(Array.from({ length: 12 }, () => app.request('POST', `/applications/${target.id}/keys`)))
  t.equal(made.filter((r) => r.status === 201).length, 10, 'concurrent creates never pass the cap')
  const refused = made.find((r) => r.status !== 201)!
  t.equal(refused.status, 409)
  t.match(refused.body.detail, /at most 10/)
  const one = made.find((r) => r.status === 201)!.body.id as string
  t.equal((await app.request('DELETE', `/applications/${target.id}/keys/${one}`)).status, 204)
  t.equal((await app.request('POST', `/applications/${target.id}/keys`)).status, 201, 'room again after a delete')
})

t.test('authorized like regenerate: no key for an Application the caller could not regenerate', async (t) => {
  const broad = await createApp(app, reader)
  const broadKey = (await app.request('POST', `/applications/${broad.id}/keys`)).body.id as string
  const narrowRules = [{ priority: 1, container: '/general/', transform: 'mask', permissions: ['token:read'] }]
  const narrowManager = await createApp(app, { type: 'management', permissions: ['application:read', 'application:update'], rules: narrowRules })
  const reads = await createApp(app, { type: 'management', permissions: ['application:read'] })

  const mint = await app.request('POST', `/applications/${broad.id}/keys`, { key: narrowManager.key })
  t.equal(mint.status, 403, 'a narrow manager cannot mint a key for a broader Application')
  t.notOk(mint.body.key)
  t.equal((await app.request('POST', `/applications/${broad.id}/regenerate`, { key: narrowManager.key })).status, 403, 'nor regenerate it (same rule)')
  t.equal((await app.request('DELETE', `/applications/${broad.id}/keys/${broadKey}`, { key: narrowManager.key })).status, 403)
  t.equal((await app.request('POST', `/applications/${broad.id}/keys`, { key: reads.key })).status, 403, 'application:read alone cannot mint')
  t.equal((await app.request('GET', `/applications/${broad.id}/keys`, { key: reads.key })).status, 200, 'but lists metadata')
  t.equal((await app.request('GET', `/applications/${broad.id}/keys`, { key: broad.key })).status, 403, 'a private key cannot list keys')

  const narrow = await createApp(app, { type: 'private', rules: narrowRules })
  t.equal((await app.request('POST', `/applications/${narrow.id}/keys`, { key: narrowManager.key })).status, 201, 'within its own grants it may')
})

t.test('deleting a key ends the sessions created or authorized with it', async (t) => {
  const writer = await appKey(app, { type: 'private', permissions: ['token:create'] })
  const token = (await app.request('POST', '/tokens', { key: writer, body: { type: 'card', data: card() } })).body.id as string
  const authorizer = await createApp(app, reader)
  const extra = (await app.request('POST', `/applications/${authorizer.id}/keys`)).body as { id: string; key: string }
  const pub = await createApp(app, { type: 'public', rules: [{ priority: 1, container: '/', transform: 'redact', permissions: ['token:create'] }] })
  const session = async (authorizerKey: string) => {
    const s = await app.request('POST', '/sessions', { key: pub.key })
    const rules = [{ priority: 1, conditions: [{ attribute: 'id', operator: 'equals', value: token }], transform: 'reveal', permissions: ['token:read'] }]
    t.equal((await app.request('POST', '/sessions/authorize', { key: authorizerKey, body: { nonce: s.body.nonce, rules } })).status, 200)
    return s.body.session_key as string
  }
  const byExtra = await session(extra.key)
  const byOwn = await session(authorizer.key)
  t.equal((await app.request('GET', `/tokens/${token}`, { key: byExtra })).status, 200)
  t.equal((await app.request('DELETE', `/applications/${authorizer.id}/keys/${extra.id}`)).status, 204)
  t.equal((await app.request('GET', `/tokens/${token}`, { key: byExtra })).status, 401, 'the session authorized with the deleted key ends')
  t.equal((await app.request('GET', `/tokens/${token}`, { key: byOwn })).status, 200, 'the one authorized with the own key stays')
})

t.test('deleting an Application while its key is regenerated and an extra key deleted: no deadlock, no 500', async (t) => {
  const publicGrant = { type: 'public', rules: [{ priority: 1, container: '/general/', transform: 'mask', permissions: ['token:create'] }] }
  for (let round = 0; round < 6; round++) {
    const target = await createApp(app, publicGrant)
    const extra = (await app.request('POST', `/applications/${target.id}/keys`)).body as { id: string; key: string }
    await Promise.all(Array.from({ length: 10 }, (_, i) => app.request('POST', '/sessions', { key: i % 2 ? target.key : extra.key })))
    const answers = await Promise.all([
      app.request('DELETE', `/applications/${target.id}`),
      app.request('POST', `/applications/${target.id}/regenerate`),
      app.request('DELETE', `/applications/${target.id}/keys/${extra.id}`),
    ])
    const statuses = answers.map((r) => r.status)
    t.equal(statuses[0], 204, `round ${round}: the delete succeeds`)
    t.ok(statuses.slice(1).every((s) => s === 200 || s === 204 || s === 404), `round ${round}: the others succeed or find it gone (${statuses.join(', ')})`)
  }
})

t.test('a deleted key is refused by a second process', { skip: process.env.DATABASE_URL ? false : 'needs DATABASE_URL (PGlite is one process)' }, async (t) => {
  const a = await startTestApp(t)
  const b = await startTestApp(t, {}, { reuse: a })
  const target = await createApp(a, reader)
  const extra = (await a.request('POST', `/applications/${target.id}/keys`)).body as { id: string; key: string }
  const read = () => b.request('GET', `/applications/${MISSING}/keys`, { key: extra.key })
  t.equal((await b.request('GET', '/permissions', { key: extra.key })).status, 200, 'the other process authenticates (and caches) the key')
  t.equal((await a.request('DELETE', `/applications/${target.id}/keys/${extra.id}`)).status, 204)
  t.equal((await eventually(() => b.request('GET', '/permissions', { key: extra.key }), (res) => res.status !== 200)).status, 401, 'refused on the other process')
  t.equal((await read()).status, 401)
})

t.test('the node SDK: applicationKeys create, list, get, delete', async (t) => {
  const target = await createApp(app, reader)
  const sdk = new BasisTheoryClient({ baseUrl: app.url, headers: { 'SVC-API-KEY': app.adminKey }, maxRetries: 0, timeoutInSeconds: 10 })
  const created = await sdk.applicationKeys.create(target.id)
  t.ok(created.id)
  t.match(created.key, /^tsr_priv_/)
  t.ok(created.createdAt instanceof Date, 'created_at parses as a date')
  const list = await sdk.applicationKeys.list(target.id)
  t.same(list.map((k) => k.id), [created.id])
  t.equal(list[0]!.key, undefined)
  const got = await sdk.applicationKeys.get(target.id, created.id!)
  t.equal(got.id, created.id)
  t.equal(got.createdBy, created.createdBy)
  await sdk.applicationKeys.delete(target.id, created.id!)
  t.same(await sdk.applicationKeys.list(target.id), [])
})
