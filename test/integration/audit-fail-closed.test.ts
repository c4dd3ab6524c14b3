import { randomUUID } from 'node:crypto'
import t, { type Test } from 'tap'
import { AppError } from '../../src/errors/index.js'
import { startTestApp } from '../helpers/app.js'
import { auditEvent, auditRows } from '../helpers/audit.js'
import { rawRequest } from '../helpers/proxy.js'
import { startStub } from '../helpers/stub-server.js'

const OPERATOR_KEY = 'operator-key-for-fail-closed-0123456789'
const app = await startTestApp(t, { SVC_AUDIT_WRITE_TIMEOUT_MS: '300', SVC_OPERATOR_KEY: OPERATOR_KEY })
const knex = app.services.store.db.knex

const refusal = (p: Promise<unknown>) => p.then(() => undefined, (e: unknown) => e)

/** Runs `fn` while no audit entry can be written (the table is away), then brings it back. */
async function withoutAuditTable<T>(fn: () => Promise<T>): Promise<T> {
  await app.services.audit.flush()
  await knex.raw('alter table audit_events rename to audit_events_away')
  try {
    return await fn()
  } finally {
    await knex.raw('alter table audit_events_away rename to audit_events')
  }
}

/** A destination whose `/pause` takes the audit table away (code running mid-call calls it); `back` restores it. */
async function pausingStub(t: Test): Promise<{ stub: Awaited<ReturnType<typeof startStub>>; back: () => Promise<void> }> {
  let away = false
  const stub = await startStub(t, (req, res) => {
    if (req.url !== '/pause') return void res.end('ok')
    void knex.raw('alter table audit_events rename to audit_events_away').then(() => {
      away = true
      res.end('paused')
    })
  })
  const back = async () => {
    if (away) await knex.raw('alter table audit_events_away rename to audit_events')
    away = false
  }
  t.teardown(back)
  return { stub, back }
}

/**
 * The same storing code run by a Reactor and by a pre-configured proxy's request transform, both
 * acting as one Application that may create tokens; `storing` gets the statement that takes the
 * audit table away (a fetch to the pausing stub) and defines `id`. Each is called once.
 */
async function storeMidCall(t: Test, name: string, storing: (pause: string, by: 'reactor' | 'transform') => string) {
  const actor = await app.request('POST', '/applications', { body: { name: `${name} storer`, type: 'private', rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:create', 'token:use'] }] } })
  const caller = (await app.request('POST', '/applications', { body: { name: `${name} caller`, type: 'private', permissions: ['token:use'] } })).body.key as string
  const { stub, back } = await pausingStub(t)
  const pause = `await fetch(${JSON.stringify(stub.origin + '/pause')}, { method: 'POST', body: 'x' })`
  const reactor = await app.request('POST', '/reactors', { body: { name, code: `module.exports = async (req) => { ${storing(pause, 'reactor')}; return { raw: id } }`, application: { id: actor.body.id } } })
  const proxy = await app.request('POST', '/proxies', {
    body: { name, destination_url: stub.origin, request_transform: { code: `module.exports = async (req) => { ${storing(pause, 'transform')}; return { body: { id } } }` }, application: { id: actor.body.id } },
  })
  t.equal(reactor.status, 201)
  t.equal(proxy.status, 201)
  await app.services.audit.flush()

  const react = await app.request('POST', `/reactors/${reactor.body.id}/react`, { key: caller, body: { args: {} } })
  await back()
  await app.services.audit.flush()
  const proxied = await rawRequest(app.url, { method: 'POST', path: '/proxy/x', body: '{}', headers: ['SVC-PROXY-KEY', proxy.body.key, 'SVC-API-KEY', caller, 'Content-Type', 'application/json'] })
  await back()
  return { react, proxied, stub }
}

t.test('a write the database refuses: 503 unavailable, /readyz degraded (still in rotation), and back once it recovers', async (t) => {
  const tenant = randomUUID()
  await knex.raw('alter table audit_events rename to audit_events_away')
  try {
    const err = await refusal(app.services.audit.record([auditEvent(tenant)]))
    t.type(err, AppError)
    t.match(err, { status: 503, code: 'unavailable' })
    // On a loaded machine the 300 ms time-out can answer before the failed write does: wait for it.
    await app.services.audit.flush()
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

t.test('the audit write fails after a change: the change stands, the answer is 503 without token data or a new key', async (t) => {
  const CARD = '4242424242424242'
  const stub = await startStub(t)
  const rules = [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:create', 'token:read', 'token:update', 'token:delete'] }]
  const writer = await app.request('POST', '/applications', { body: { name: 'writer', type: 'private', rules } })
  const key = writer.body.key as string
  const target = await app.request('POST', '/applications', { body: { name: 'target', type: 'private', permissions: ['token:read'] } })
  const pub = await app.request('POST', '/applications', { body: { name: 'pub', type: 'public', permissions: ['token:create'] } })
  const victim = (await app.request('POST', '/tokens', { key, body: { type: 'card_number', data: CARD } })).body.id as string
  const tokenCount = async () => Number((await knex('tokens').count({ n: '*' }).first())!.n)
  const before = await tokenCount()

  const answers = await withoutAuditTable(async () => ({
    create: await app.request('POST', '/tokens', { key, body: { type: 'card_number', data: CARD } }),
    tokenize: await app.request('POST', '/tokenize', { key, body: { card: { type: 'card_number', data: CARD }, plain: CARD } }),
    update: await app.request('PATCH', `/tokens/${victim}`, { key, body: { metadata: { a: 'b' } }, headers: { 'content-type': 'application/merge-patch+json' } }),
    delete: await app.request('DELETE', `/tokens/${victim}`, { key }),
    application: await app.request('POST', '/applications', { body: { name: 'made while the log was away', type: 'private', permissions: ['token:read'] } }),
    regenerate: await app.request('POST', `/applications/${target.body.id}/regenerate`),
    extraKey: await app.request('POST', `/applications/${target.body.id}/keys`),
    proxy: await app.request('POST', '/proxies', { body: { name: 'p', destination_url: stub.origin } }),
    session: await app.request('POST', '/sessions', { key: pub.body.key }),
  }))
  for (const [what, res] of Object.entries(answers)) {
    t.equal(res.status, 503, `${what}: 503`)
    t.match(res.body, { type: '/problems/unavailable' }, `${what}: the audit log is unavailable`)
    t.notOk(res.text.includes(CARD), `${what}: no token data`)
    t.notMatch(res.text, /tsr_/, `${what}: no key`)
  }
  // The changes happened (the README says so: a retry may repeat them).
  t.equal(await tokenCount(), before + 3 - 1, 'three tokens stored, one deleted')
  t.equal((await app.request('GET', `/tokens/${victim}`, { key })).status, 404, 'the delete stands')
  const apps = (await app.request('GET', '/applications?size=100')).body.data as { name: string }[]
  t.ok(apps.some((a) => a.name === 'made while the log was away'), 'the Application exists, its key never shown')
  t.equal((await app.request('GET', '/tokens', { key: target.body.key })).status, 401, 'the regenerate stands: the old key is gone')
})

t.test('a tenant whose entries cannot be written: 503 without the key, and neither the tenant nor its Application is left, so the name can be used again', async (t) => {
  const name = 'made while the log was away'
  const tenantRows = () => knex('tenants').where({ name })
  const res = await withoutAuditTable(() => app.request('POST', '/tenants', { key: OPERATOR_KEY, body: { name } }))
  t.equal(res.status, 503)
  t.match(res.headers.get('content-type'), /^application\/problem\+json/)
  t.match(res.body, { type: '/problems/unavailable', status: 503 })
  t.notMatch(res.text, /tsr_/, 'no key')
  t.same(await tenantRows(), [], 'no tenant row')
  t.same(await knex('applications').where({ name: `${name} management` }), [], 'no Application row')

  await app.services.audit.flush()
  const again = await app.request('POST', '/tenants', { key: OPERATOR_KEY, body: { name } })
  t.equal(again.status, 201, again.text)
  t.same((await tenantRows()).map((r: { id: string }) => r.id), [again.body.tenant.id])
  await app.services.audit.flush()
  const rows = await auditRows(app, again.body.tenant.id)
  t.same(rows.map((r) => [Number(r.seq), r.action]), [[1, 'tenant.create'], [2, 'application.create']], 'the retry opens its own chain')
  t.equal((await app.request('GET', '/tenants/self', { key: again.body.application.key })).status, 200, 'its key works')
})

t.test('a Reactor bridge read whose entry cannot be written: the running code gets no plaintext, the caller 503 though the code caught it', async (t) => {
  const CARD = '4111111111111111'
  const rules = [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:create', 'token:read', 'token:use'] }]
  const caller = await app.request('POST', '/applications', { body: { name: 'bridge caller', type: 'private', rules } })
  const actor = await app.request('POST', '/applications', { body: { name: 'bridge actor', type: 'private', rules } })
  const id = (await app.request('POST', '/tokens', { key: caller.body.key, body: { type: 'card_number', data: CARD } })).body.id as string
  // A token in the args makes the invocation an entry that is recorded (awaited) before the code runs.
  const argToken = (await app.request('POST', '/tokens', { key: caller.body.key, body: { type: 'card_number', data: '5555555555554444' } })).body.id as string
  // The destination takes the audit table away while the invocation (already recorded) runs.
  const { stub, back } = await pausingStub(t)
  const code = `module.exports = async (req) => {
    await fetch(${JSON.stringify(stub.origin + '/pause')}, { method: 'POST', body: 'x' })
    let seen
    try { seen = await req.svc.detokenize('{{ ${id} }}') } catch (e) { seen = 'refused' }
    await fetch(${JSON.stringify(stub.origin + '/seen')}, { method: 'POST', body: String(seen) })
    return { raw: String(seen) }
  }`
  const reactor = await app.request('POST', '/reactors', { body: { name: 'bridge reader', code, application: { id: actor.body.id } } })
  t.equal(reactor.status, 201)
  await app.services.audit.flush()
  const res = await app.request('POST', `/reactors/${reactor.body.id}/react`, { key: caller.body.key, body: { args: { other: `{{ ${argToken} }}` } } })
  await back()
  t.equal(res.status, 503, res.text)
  t.match(res.body, { type: '/problems/unavailable' })
  t.same(stub.seen.map((s) => s.url), ['/pause'], 'after the failed entry the code sends nothing more (its fetch needs an entry too)')
  await app.services.audit.flush()
  const rows = await auditRows(app)
  t.notOk(rows.some((r) => r.action === 'reactor.token_read' && r.token_ids.includes(id)), 'no entry claims a read that never happened')
  t.ok(rows.some((r) => r.action === 'reactor.invoke' && r.target_ids.includes(reactor.body.id) && r.token_ids.includes(argToken)), 'the invocation was recorded before the code ran')
})

t.test('tokens stored by a Reactor or a transform whose entry cannot be written: 503 though the code caught the error, nothing forwarded', async (t) => {
  // Takes the audit table away, then stores a token and swallows whatever the bridge throws.
  const { react, proxied, stub } = await storeMidCall(t, 'catches', (pause) => `${pause}
    let id
    try { id = (await req.svc.tokenize({ type: 'token', data: 'unrecorded' })).id } catch (e) { id = 'refused' }`)
  t.equal(react.status, 503, react.text)
  t.match(react.body, { type: '/problems/unavailable' })
  t.equal(proxied.status, 503, proxied.body.toString())
  t.match(proxied.body.toString(), /unavailable/)
  t.same(stub.seen.map((s) => s.url), ['/pause', '/pause'], 'the destination saw only the transform\'s own fetch, never the request')
})

t.test('tokens a Reactor or a transform stores without awaiting them, answering at once: 503 all the same when their entry cannot be written', async (t) => {
  // The answer is on its way before the insert, let alone its entry, has ended.
  const { react, proxied, stub } = await storeMidCall(t, 'unawaited', (pause, by) => `${pause}
    const id = 'unawaited-by-${by}'
    req.svc.tokenize({ id, type: 'token', data: 'unrecorded' }).catch(() => undefined)`)
  t.equal(react.status, 503, react.text)
  t.match(react.body, { type: '/problems/unavailable' })
  t.equal(proxied.status, 503, proxied.body.toString())
  t.same(stub.seen.map((s) => s.url), ['/pause', '/pause'], 'the destination never saw the request')
  t.equal(Number((await knex('tokens').whereIn('id', ['unawaited-by-reactor', 'unawaited-by-transform']).count({ n: '*' }).first())!.n), 2, 'the tokens were stored (the change stands, as on every path)')
})

t.test('a change that stands after its entry failed keeps its idempotency key: a retry does not make it twice', async (t) => {
  const key = (await app.request('POST', '/applications', { body: { name: 'once', type: 'private', rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:create', 'token:read'] }] } })).body.key as string
  const count = async (table: string) => Number((await knex(table).count({ n: '*' }).first())!.n)
  for (const [table, path, body, asKey] of [
    ['tokens', '/tokens', { type: 'token', data: 'pay once' }, key],
    ['applications', '/applications', { name: 'made once', type: 'private', permissions: ['token:read'] }, undefined],
  ] as const) {
    const before = await count(table)
    const headers = { 'SVC-IDEMPOTENCY-KEY': `once-${table}` }
    const first = await withoutAuditTable(() => app.request('POST', path, { key: asKey, body, headers }))
    t.equal(first.status, 503, `${table}: the entry could not be written`)
    t.equal(await count(table), before + 1, `${table}: the change stands`)
    const retry = await app.request('POST', path, { key: asKey, body, headers })
    t.equal(retry.status, 409, `${table}: the retry is not run again`)
    t.match(retry.body, { type: '/problems/idempotency-withheld', detail: /answered with status 503/ })
    t.equal(await count(table), before + 1, `${table}: one, not two`)
  }
  // A failure that changed nothing still gives its key up.
  const headers = { 'SVC-IDEMPOTENCY-KEY': 'refused-then-fixed' }
  t.equal((await app.request('POST', '/tokens', { key, body: { type: 'card', data: { number: '1' } }, headers })).status, 400)
  t.equal((await app.request('POST', '/tokens', { key, body: { type: 'card', data: { number: '1' } }, headers })).status, 400, 'runs again')
})

t.test('tokens a Reactor stored before it failed keep the idempotency key too', async (t) => {
  const actor = await app.request('POST', '/applications', { body: { name: 'storer', type: 'private', rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:create', 'token:use'] }] } })
  const caller = (await app.request('POST', '/applications', { body: { name: 'invoker', type: 'private', permissions: ['token:use'] } })).body.key as string
  const code = "module.exports = async (req) => { await req.svc.tokenize({ type: 'token', data: 'stored once' }); throw new Error('failed after storing') }"
  const reactor = await app.request('POST', '/reactors', { body: { name: 'stores then fails', code, application: { id: actor.body.id } } })
  const count = async () => Number((await knex('tokens').count({ n: '*' }).first())!.n)
  const before = await count()
  const headers = { 'SVC-IDEMPOTENCY-KEY': 'reactor-stores-once' }
  const react = () => app.request('POST', `/reactors/${reactor.body.id}/react`, { key: caller, body: { args: {} }, headers })
  t.equal((await react()).status, 500)
  t.equal(await count(), before + 1, 'the token stands')
  t.equal((await react()).status, 409, 'the retry is not run again')
  t.equal(await count(), before + 1)
})
