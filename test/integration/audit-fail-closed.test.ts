import { randomUUID } from 'node:crypto'
import t from 'tap'
import { AppError } from '../../src/errors/index.js'
import { startTestApp } from '../helpers/app.js'
import { auditEvent, auditRows } from '../helpers/audit.js'
import { rawRequest } from '../helpers/proxy.js'
import { startStub } from '../helpers/stub-server.js'

const app = await startTestApp(t, { SVC_AUDIT_WRITE_TIMEOUT_MS: '300' })
const knex = app.services.store.db.knex

const refusal = (p: Promise<unknown>) => p.then(() => undefined, (e: unknown) => e)

t.test('a write the database refuses: 503 unavailable, /readyz degraded (still in rotation), and back once it recovers', async (t) => {
  const tenant = randomUUID()
  await knex.raw('alter table audit_events rename to audit_events_away')
  try {
    const err = await refusal(app.services.audit.record([auditEvent(tenant)]))
    t.type(err, AppError)
    t.match(err, { status: 503, code: 'unavailable' })
    // Not `down`: an instance out of rotation would never be sent the write that clears it.
    const ready = await app.request('GET', '/readyz', { key: null })
    t.equal(ready.status, 200)
    t.match(ready.body, { status: 'degraded', components: { audit: 'degraded', database: 'ok' } })
  } finally {
    await knex.raw('alter table audit_events_away rename to audit_events')
  }
  await app.services.audit.record([auditEvent(tenant)])
  t.equal((await app.request('GET', '/readyz', { key: null })).body.components.audit, 'ok')
  t.same((await auditRows(app, tenant)).map((r) => r.seq), [1], 'the failed batch left no trace in the chain')
  t.ok((await app.services.audit.verify({ tenantId: tenant })).ok)
})

t.test('a database that does not answer in time: 503 after the write time-out, the chain intact after', async (t) => {
  const tenant = randomUUID()
  await app.services.audit.record([auditEvent(tenant)])
  // Holds the chain head (Postgres) or the only connection (PGlite), as a stuck database would.
  const blocker = await knex.transaction()
  await blocker('audit_chain_heads').where({ tenant_id: tenant }).forUpdate()
  try {
    const err = await refusal(app.services.audit.record([auditEvent(tenant)]))
    t.match(err, { status: 503, code: 'unavailable' })
  } finally {
    await blocker.rollback()
  }
  await app.services.audit.flush()
  await app.services.audit.record([auditEvent(tenant)])
  t.ok((await app.services.audit.verify({ tenantId: tenant })).ok, 'whatever was written is a valid chain')
})

t.test('the audit write fails: token read, detokenize, /proxy, a pre-configured proxy and a Reactor answer 503, revealing and forwarding nothing', async (t) => {
  const CARD = '4242424242424242'
  const stub = await startStub(t)
  const rules = [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:create', 'token:read', 'token:search', 'token:use'] }]
  const caller = await app.request('POST', '/applications', { body: { name: 'caller', type: 'private', rules } })
  const key = caller.body.key as string
  const id = (await app.request('POST', '/tokens', { key, body: { type: 'card_number', data: CARD } })).body.id as string
  const actor = await app.request('POST', '/applications', { body: { name: 'actor', type: 'private', rules } })
  // Invoked, the Reactor would post its detokenized args to the stub.
  const code = `module.exports = async (req) => { await fetch(${JSON.stringify(stub.origin + '/reactor')}, { method: 'POST', body: req.args.n }); return { raw: 'ran' } }`
  const reactor = await app.request('POST', '/reactors', { body: { name: 'r', code, application: { id: actor.body.id } } })
  const proxy = await app.request('POST', '/proxies', { body: { name: 'p', destination_url: stub.origin, application: { id: actor.body.id } } })
  t.equal(reactor.status, 201)
  t.equal(proxy.status, 201)
  await app.services.audit.flush()

  await knex.raw('alter table audit_events rename to audit_events_away')
  const answers: Record<string, { status: number; text: string }> = {}
  try {
    answers.read = await app.request('GET', `/tokens/${id}`, { key })
    answers.list = await app.request('GET', `/tokens?id=${id}`, { key })
    answers.search = await app.request('POST', '/v2/tokens/search', { key, body: { query: `id:${id}` } })
    answers.detokenize = await app.request('POST', '/detokenize', { key, body: { n: `{{ ${id} }}` } })
    const body = `{"n":"{{ ${id} }}"}`
    const ephemeral = await rawRequest(app.url, { method: 'POST', path: '/proxy', body, headers: ['SVC-API-KEY', key, 'SVC-PROXY-URL', stub.origin, 'Content-Type', 'application/json'] })
    answers.proxy = { status: ephemeral.status, text: ephemeral.body.toString() }
    const preconfigured = await rawRequest(app.url, { method: 'POST', path: '/proxy', body, headers: ['SVC-PROXY-KEY', proxy.body.key, 'SVC-API-KEY', key, 'Content-Type', 'application/json'] })
    answers.preconfigured = { status: preconfigured.status, text: preconfigured.body.toString() }
    answers.react = await app.request('POST', `/reactors/${reactor.body.id}/react`, { key, body: { args: { n: `{{ ${id} }}` } } })
  } finally {
    await knex.raw('alter table audit_events_away rename to audit_events')
  }
  for (const [path, res] of Object.entries(answers)) {
    t.equal(res.status, 503, `${path}: 503`)
    t.match(res.text, /unavailable/, `${path}: the audit log is unavailable`)
    t.notOk(res.text.includes(CARD), `${path}: nothing revealed`)
  }
  t.equal(stub.seen.length, 0, 'the destinations (and the Reactor\'s fetch) saw no request')

  // Once the log is back, the same calls go through: the 503s were the log, nothing else.
  await app.services.audit.flush()
  t.equal((await app.request('GET', `/tokens/${id}`, { key })).body.data, CARD)
  t.equal((await app.request('POST', `/reactors/${reactor.body.id}/react`, { key, body: { args: { n: `{{ ${id} }}` } } })).status, 200)
  t.equal(stub.seen.at(-1)!.body.toString(), CARD, 'the Reactor ran with the plaintext once its invocation was recorded')
})
