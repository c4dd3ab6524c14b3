import t, { type Test } from 'tap'
import { migrationSource } from '../../migrations/index.js'
import { databaseBefore } from '../helpers/migrations.js'
import { startTestApp, type TestApp } from '../helpers/app.js'
import { rawRequest } from '../helpers/proxy.js'
import { startStub } from '../helpers/stub-server.js'
import { appKey, application, createToken } from '../helpers/tokens.js'

/**
 * Code bound to an Application acts as it only within the current grants of the key that bound
 * it (README "Code and proxy keys act as their Application"), as a session acts within its
 * authorizer's: a management key with a /general/ ceiling that binds a /general/ Application
 * does not gain /pci/ when someone else later widens that Application; narrowing or deleting the
 * binder narrows or stops the code; a save by a wider key binds anew.
 */

const PCI = 'PCI-SECRET'
const GENERAL = 'GENERAL-PLAIN'
const rule = (container: string, permissions: string[]) => [{ priority: 1, container, transform: 'reveal', permissions }]
const binderPermissions = ['reactor:create', 'reactor:read', 'reactor:update', 'proxy:create', 'proxy:read', 'proxy:update']
const ceiling = ['token:use', 'token:read', 'token:create']
const reading = "module.exports = async (req) => { try { return { raw: await req.svc.detokenize('{{ ' + req.args.id + ' }}') } } catch (e) { return { raw: 'refused: ' + e.message } } }"

interface World {
  app: TestApp
  pci: string
  general: string
  invoker: string
  /** A management key holding only /general/ as its token ceiling. */
  binder: { id: string; key: string }
  /** A new private Application acting on /general/, for `binder` to bind (before it is widened). */
  newActor(): Promise<string>
}

async function world(t: Test): Promise<World> {
  const app = await startTestApp(t)
  const writer = await appKey(app, { type: 'private', rules: rule('/', ['token:create']) })
  const pci = await createToken(app, writer, { type: 'token', data: PCI, containers: ['/pci/'] })
  const general = await createToken(app, writer, { type: 'token', data: GENERAL, containers: ['/general/'] })
  const invoker = await appKey(app, { type: 'private', rules: rule('/general/', ['token:use']) })
  const binder = await application(app, { type: 'management', permissions: binderPermissions, rules: rule('/general/', ceiling) })
  const newActor = async () => (await application(app, { type: 'private', rules: rule('/general/', ['token:use']) })).id
  return { app, pci, general, invoker, binder, newActor }
}

const widen = (w: World, id: string) => w.app.request('PUT', `/applications/${id}`, { body: { name: 'test app', rules: rule('/', ['token:use']) } })

t.test('a Reactor bound by a narrow key', async (t) => {
  const w = await world(t)
  const { app } = w
  const save = async (actor: string) => {
    const res = await app.request('POST', '/reactors', { key: w.binder.key, body: { name: 'r', code: reading, application: { id: actor } } })
    t.equal(res.status, 201, res.text)
    return res.body.id as string
  }
  const react = async (reactor: string, id: string) => (await app.request('POST', `/reactors/${reactor}/react`, { key: w.invoker, body: { args: { id } } })).body.raw

  t.test('does not gain what the Application is widened to later', async (t) => {
    const actor = await w.newActor()
    const reactor = await save(actor)
    t.match(await react(reactor, w.pci), /^refused: /, 'refused before the widening')
    t.equal((await widen(w, actor)).status, 200)
    t.match(await react(reactor, w.pci), `refused: The key holds token:use on token ${w.pci}, but not within the grants it acts within here`, 'still refused: the binder holds only /general/')
    t.equal(await react(reactor, w.general), GENERAL, 'what both hold still works')
  })

  t.test('saved again by a key that holds the widened grant, it acts with it', async (t) => {
    const actor = await w.newActor()
    const reactor = await save(actor)
    t.equal((await widen(w, actor)).status, 200)
    t.match(await react(reactor, w.pci), /^refused: /)
    const wider = await app.request('PUT', `/reactors/${reactor}`, { body: { name: 'r', code: reading, application: { id: actor } } })
    t.equal(wider.status, 200, wider.text)
    t.equal(await react(reactor, w.pci), PCI, 'bound by the bootstrap key now')
  })

  t.test('narrowing the binder narrows the code; deleting it stops the code (403)', async (t) => {
    const binder = await application(app, { type: 'management', permissions: binderPermissions, rules: rule('/', ceiling) })
    const actor = await application(app, { type: 'private', rules: rule('/', ['token:use']) })
    const created = await app.request('POST', '/reactors', { key: binder.key, body: { name: 'r', code: reading, application: { id: actor.id } } })
    t.equal(created.status, 201, created.text)
    const reactor = created.body.id as string
    t.equal(await react(reactor, w.pci), PCI, 'the binder holds /pci/: so does the code')
    const narrowed = await app.request('PUT', `/applications/${binder.id}`, { body: { name: 'test app', permissions: binderPermissions, rules: rule('/general/', ceiling) } })
    t.equal(narrowed.status, 200, narrowed.text)
    t.match(await react(reactor, w.pci), `refused: The key holds token:use on token ${w.pci}, but not within the grants it acts within here`)
    t.equal(await react(reactor, w.general), GENERAL)
    t.equal((await app.request('DELETE', `/applications/${binder.id}`)).status, 204)
    t.equal(await react(reactor, w.general), 'refused: The Reactor has no Application to act as.', 'like a session whose authorizer is gone')
  })
})

t.test('a require_auth: false proxy bound by a narrow key', async (t) => {
  const w = await world(t)
  const { app } = w
  const stub = await startStub(t)
  const call = (proxyKey: string, id: string) => rawRequest(app.url, { method: 'POST', path: '/proxy/x', body: JSON.stringify({ v: `{{ ${id} }}` }), headers: ['SVC-PROXY-KEY', proxyKey, 'Content-Type', 'application/json'] })
  /** A proxy `binder` binds to a new /general/ Application, which is then widened to `/`. */
  const create = async (body: Record<string, unknown>, binder = w.binder) => {
    const actor = await w.newActor()
    const res = await app.request('POST', '/proxies', { key: binder.key, body: { name: 'p', destination_url: stub.origin, require_auth: false, application: { id: actor }, ...body } })
    t.equal(res.status, 201, res.text)
    return { key: res.body.key as string, widen: async () => t.equal((await widen(w, actor)).status, 200) }
  }

  t.test('its key does not gain what the Application is widened to later', async (t) => {
    const { key, widen } = await create({})
    t.equal((await call(key, w.general)).status, 200, 'detokenizes /general/ (and caches the proxy)')
    await widen()
    stub.seen.length = 0
    const res = await call(key, w.pci)
    t.equal(res.status, 403, res.body.toString())
    t.same(stub.seen, [], 'nothing reached the destination')
  })

  t.test('nor does the transform code of a require_auth proxy', async (t) => {
    const code = "module.exports = async (req) => { let v; try { v = await req.svc.detokenize('{{ ' + req.body.id + ' }}') } catch (e) { v = 'refused' } return { body: { v } } }"
    const { key, widen } = await create({ require_auth: true, request_transform: { code } })
    await widen()
    stub.seen.length = 0
    const res = await rawRequest(app.url, { method: 'POST', path: '/proxy/x', body: JSON.stringify({ id: w.pci }), headers: ['SVC-PROXY-KEY', key, 'SVC-API-KEY', w.invoker, 'Content-Type', 'application/json'] })
    t.equal(res.status, 200, res.body.toString())
    t.same(stub.seen.map((s) => JSON.parse(s.body.toString())), [{ v: 'refused' }])
  })

  t.test('deleting the binder stops a cached proxy at once', async (t) => {
    const binder = await application(app, { type: 'management', permissions: binderPermissions, rules: rule('/general/', ceiling) })
    const { key } = await create({}, binder)
    t.equal((await call(key, w.general)).status, 200, 'cached')
    t.equal((await app.request('DELETE', `/applications/${binder.id}`)).status, 204)
    stub.seen.length = 0
    const after = await call(key, w.general)
    t.equal(after.status, 403, after.body.toString())
    t.same(stub.seen, [])
  })
})

t.test('the migration takes the binder of existing rows from their last saver', async (t) => {
  const knex = await databaseBefore(t, '20261129000200_code_binders')
  const now = new Date()
  const [tenant] = await knex('tenants').insert({ id: '00000000-0000-4000-8000-000000000001', name: 't', created_at: now, modified_at: now }).returning('id')
  const app = { tenant_id: tenant.id, name: 'a', key_hash: 'a'.repeat(64), permissions: JSON.stringify([]), rules: JSON.stringify([]), created_at: now, modified_at: now }
  await knex('applications').insert([
    { ...app, id: '00000000-0000-4000-8000-00000000000a', type: 'private' },
    { ...app, id: '00000000-0000-4000-8000-00000000000b', type: 'management', key_hash: 'b'.repeat(64) },
  ])
  const saver = '00000000-0000-4000-8000-00000000000b'
  const row = (id: string, application_id: string | null) => ({ id, tenant_id: tenant.id, name: 'r', application_id, created_by: saver, created_at: now, modified_by: saver, modified_at: now })
  await knex('reactors').insert([
    { ...row('00000000-0000-4000-8000-000000000101', '00000000-0000-4000-8000-00000000000a'), code: 'x', version: '00000000-0000-4000-8000-000000000001' },
    { ...row('00000000-0000-4000-8000-000000000102', null), code: 'x', version: '00000000-0000-4000-8000-000000000001' },
    // Saved by a key deleted before the upgrade: left acting as its Application alone, not stopped.
    { ...row('00000000-0000-4000-8000-000000000103', '00000000-0000-4000-8000-00000000000a'), modified_by: '00000000-0000-4000-8000-0000000000ff', code: 'x', version: '00000000-0000-4000-8000-000000000001' },
  ])
  await knex('proxies').insert({ ...row('00000000-0000-4000-8000-000000000201', '00000000-0000-4000-8000-00000000000a'), key_hash: 'c'.repeat(64), destination_url: 'https://example.com', version: '00000000-0000-4000-8000-000000000001' })
  await knex.migrate.up({ migrationSource })
  t.same(await knex('reactors').select('id', 'bound_by').orderBy('id'), [
    { id: '00000000-0000-4000-8000-000000000101', bound_by: saver },
    { id: '00000000-0000-4000-8000-000000000102', bound_by: null },
    { id: '00000000-0000-4000-8000-000000000103', bound_by: null },
  ])
  t.same(await knex('proxies').select('bound_by'), [{ bound_by: saver }])
})
