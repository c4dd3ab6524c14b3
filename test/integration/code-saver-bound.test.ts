import t, { type Test } from 'tap'
import { migrationSource } from '../../migrations/index.js'
import { databaseBefore } from '../helpers/migrations.js'
import { startTestApp } from '../helpers/app.js'
import { rawRequest } from '../helpers/proxy.js'
import { startStub } from '../helpers/stub-server.js'
import { appKey, application, createToken } from '../helpers/tokens.js'

/**
 * Callers' data goes to code or a destination someone else saved: a react's `args` and the
 * expressions of a `require_auth` proxy are detokenized with the caller's grants, and within the
 * saver's current grants too (README "Code and proxy keys act as their Application"). A
 * management key that may only change a Reactor's code or a proxy's destination, with no token
 * ceiling, must not receive through it what wide callers send.
 */

const PCI = 'PCI-SECRET'
const GENERAL = 'GENERAL-PLAIN'
const rule = (container: string, permissions: string[]) => [{ priority: 1, container, transform: 'reveal', permissions }]
const ceiling = ['token:use', 'token:read', 'token:create']
const echo = 'module.exports = async (req) => ({ raw: req.args })'

async function world(t: Test) {
  const app = await startTestApp(t)
  const writer = await appKey(app, { type: 'private', rules: rule('/', ['token:create']) })
  const pci = await createToken(app, writer, { type: 'token', data: PCI, containers: ['/pci/'] })
  const general = await createToken(app, writer, { type: 'token', data: GENERAL, containers: ['/general/'] })
  const caller = await appKey(app, { type: 'private', rules: rule('/', ['token:use']) })
  return { app, pci, general, caller }
}

t.test('a Reactor rewritten by a key without the token ceiling gets no caller data', async (t) => {
  const { app, pci, general, caller } = await world(t)
  const created = await app.request('POST', '/reactors', { body: { name: 'r', code: echo } })
  t.equal(created.status, 201, created.text)
  const id = created.body.id as string
  const react = (v: string) => app.request('POST', `/reactors/${id}/react`, { key: caller, body: { args: { v } } })
  t.same((await react(`{{ ${pci} }}`)).body.raw, { v: PCI }, 'saved by the bootstrap key (the full ceiling): the caller\'s card reaches the code')

  const editor = await application(app, { type: 'management', permissions: ['reactor:read', 'reactor:update'] })
  const rewritten = await app.request('PUT', `/reactors/${id}`, { key: editor.key, body: { name: 'r', code: echo } })
  t.equal(rewritten.status, 200, rewritten.text)
  const refused = await react(`{{ ${pci} }}`)
  t.equal(refused.status, 403, refused.text)
  t.notMatch(refused.text, PCI)
  t.equal((await react(`{{ ${general} }}`)).status, 403, 'nor any other token')
  t.same((await react('no token')).body.raw, { v: 'no token' }, 'args without tokens still go')

  const general_ = await application(app, { type: 'management', permissions: ['reactor:read', 'reactor:update'], rules: rule('/general/', ceiling) })
  t.equal((await app.request('PUT', `/reactors/${id}`, { key: general_.key, body: { name: 'r', code: echo } })).status, 200)
  t.same((await react(`{{ ${general} }}`)).body.raw, { v: GENERAL }, 'saved by a /general/ ceiling: /general/ goes')
  const beyond = await react(`{{ ${pci} }}`)
  t.equal(beyond.status, 403, '/pci/ does not')
  t.match(beyond.body.detail, /holds token:use on token .*but not within the grants it acts within here/, 'the refusal says the caller\'s key is not what lacks it')
  t.equal((await app.request('DELETE', `/applications/${general_.id}`)).status, 204)
  t.equal((await react(`{{ ${general} }}`)).status, 403, 'the saver deleted: nothing goes until someone saves it again')
})

t.test('a require_auth proxy re-pointed by a key without the token ceiling forwards no caller data', async (t) => {
  const { app, pci, general, caller } = await world(t)
  const stub = await startStub(t)
  const created = await app.request('POST', '/proxies', { body: { name: 'p', destination_url: stub.origin } })
  t.equal(created.status, 201, created.text)
  const { id, key } = created.body as { id: string; key: string }
  const call = (v: string) => rawRequest(app.url, { method: 'POST', path: '/proxy/x', body: JSON.stringify({ v }), headers: ['SVC-PROXY-KEY', key, 'SVC-API-KEY', caller, 'Content-Type', 'application/json'] })
  t.equal((await call(`{{ ${pci} }}`)).status, 200)
  t.same(stub.seen.map((s) => JSON.parse(s.body.toString())), [{ v: PCI }], 'saved by the bootstrap key: the card goes')

  const editor = await application(app, { type: 'management', permissions: ['proxy:read', 'proxy:update'] })
  t.equal((await app.request('PUT', `/proxies/${id}`, { key: editor.key, body: { name: 'p', destination_url: stub.origin } })).status, 200)
  stub.seen.length = 0
  const refused = await call(`{{ ${pci} }}`)
  t.equal(refused.status, 403, refused.body.toString())
  t.match(JSON.parse(refused.body.toString()), { proxy_error: { detail: /saved or bound this proxy/ } })
  t.equal((await call('no token')).status, 403, 'its saver holds no token:use: the proxy does not forward at all')
  t.same(stub.seen, [], 'nothing reached the destination')

  const general_ = await application(app, { type: 'management', permissions: ['proxy:read', 'proxy:update'], rules: rule('/general/', ceiling) })
  t.equal((await app.request('PUT', `/proxies/${id}`, { key: general_.key, body: { name: 'p', destination_url: stub.origin } })).status, 200)
  t.equal((await call(`{{ ${general} }}`)).status, 200)
  const beyond = await call(`{{ ${pci} }}`)
  t.equal(beyond.status, 403)
  t.match(JSON.parse(beyond.body.toString()), { proxy_error: { detail: /holds token:use on token .*but not within the grants it acts within here/ } })
  t.same(stub.seen.map((s) => JSON.parse(s.body.toString())), [{ v: GENERAL }], 'only what the saver reaches went')
})

t.test('a require_auth: false proxy stops when its binder loses token:use', async (t) => {
  const { app } = await world(t)
  const stub = await startStub(t)
  const binder = await application(app, { type: 'management', permissions: ['proxy:create', 'proxy:read'], rules: rule('/general/', ceiling) })
  const actor = await application(app, { type: 'private', rules: rule('/general/', ['token:use']) })
  const created = await app.request('POST', '/proxies', { key: binder.key, body: { name: 'p', destination_url: stub.origin, require_auth: false, application: { id: actor.id } } })
  t.equal(created.status, 201, created.text)
  const call = () => rawRequest(app.url, { method: 'POST', path: '/proxy/x', body: '{"hello":1}', headers: ['SVC-PROXY-KEY', created.body.key, 'Content-Type', 'application/json'] })
  t.equal((await call()).status, 200)
  t.equal((await app.request('PUT', `/applications/${binder.id}`, { body: { name: 'test app', permissions: ['proxy:create', 'proxy:read'] } })).status, 200)
  stub.seen.length = 0
  t.equal((await call()).status, 403, 'as when the Application itself loses token:use')
  t.same(stub.seen, [])
})

t.test('the migration takes the saver of existing rows without one from their last saver, if it still exists and has not expired', async (t) => {
  const knex = await databaseBefore(t, '20261130000000_code_savers')
  const now = new Date()
  const [tenant] = await knex('tenants').insert({ id: '00000000-0000-4000-8000-000000000001', name: 't', created_at: now, modified_at: now }).returning('id')
  const saver = '00000000-0000-4000-8000-00000000000b'
  await knex('applications').insert({ id: saver, type: 'management', tenant_id: tenant.id, name: 'a', key_hash: 'b'.repeat(64), permissions: JSON.stringify([]), rules: JSON.stringify([]), created_at: now, modified_at: now })
  const expired = '00000000-0000-4000-8000-00000000000c'
  await knex('applications').insert({ id: expired, type: 'management', tenant_id: tenant.id, name: 'e', key_hash: 'e'.repeat(64), permissions: JSON.stringify([]), rules: JSON.stringify([]), created_at: now, modified_at: now, expires_at: new Date(now.getTime() - 60_000) })
  const row = (id: string, modified_by: string) => ({ id, tenant_id: tenant.id, name: 'r', application_id: null, created_by: saver, created_at: now, modified_by, modified_at: now })
  const version = '00000000-0000-4000-8000-000000000001'
  await knex('reactors').insert([
    { ...row('00000000-0000-4000-8000-000000000101', saver), code: 'x', version },
    // Saved by a key deleted (or expired) before the upgrade: left unbounded, not stopped.
    { ...row('00000000-0000-4000-8000-000000000102', '00000000-0000-4000-8000-0000000000ff'), code: 'x', version },
    { ...row('00000000-0000-4000-8000-000000000103', expired), code: 'x', version },
    // With an Application, saved through a server that did not record binders: bounded too.
    { ...row('00000000-0000-4000-8000-000000000104', saver), application_id: saver, code: 'x', version },
  ])
  await knex('proxies').insert({ ...row('00000000-0000-4000-8000-000000000201', saver), key_hash: 'c'.repeat(64), destination_url: 'https://example.com', version })
  await knex.migrate.up({ migrationSource })
  t.same(await knex('reactors').select('id', 'bound_by').orderBy('id'), [
    { id: '00000000-0000-4000-8000-000000000101', bound_by: saver },
    { id: '00000000-0000-4000-8000-000000000102', bound_by: null },
    { id: '00000000-0000-4000-8000-000000000103', bound_by: null },
    { id: '00000000-0000-4000-8000-000000000104', bound_by: saver },
  ])
  t.same(await knex('proxies').select('bound_by'), [{ bound_by: saver }])
})

t.test('a refusal after forwarding keeps the destination status (require_auth proxy, saved)', async (t) => {
  const { app, caller } = await world(t)
  const stub = await startStub(t)
  const actor = await application(app, { type: 'private', permissions: ['token:use', 'token:read'] })
  const code = "module.exports = async () => { throw new AuthorizationError('code says no') }"
  const created = await app.request('POST', '/proxies', { body: { name: 'p', destination_url: stub.origin, application: { id: actor.id }, response_transform: { code } } })
  t.equal(created.status, 201, created.text)
  const res = await rawRequest(app.url, { method: 'POST', path: '/proxy/x', body: '{}', headers: ['SVC-PROXY-KEY', created.body.key, 'SVC-API-KEY', caller, 'Content-Type', 'application/json'] })
  t.equal(res.status, 403, res.body.toString())
  t.equal(res.headers['svc-proxy-destination-status'], '200', 'the caller can tell the destination answered')
  t.match(JSON.parse(res.body.toString()), { proxy_error: { detail: /code says no/ } })
})
