import t from 'tap'
import { startTestApp } from '../helpers/app.js'
import { auditRows } from '../helpers/audit.js'
import { rawRequest } from '../helpers/proxy.js'
import { startStub } from '../helpers/stub-server.js'

// Paths of the fail-closed promise an audit review found open: a bridge call after another's
// failed entry, data rendered into a proxied request before its entry, and a create that found
// its token by deduplication (nothing changed) holding its idempotency key after a failure.
const app = await startTestApp(t, { SVC_AUDIT_WRITE_TIMEOUT_MS: '300' })
const knex = app.services.store.db.knex

/**
 * A destination whose `/pause` takes the audit table away and answers, and brings the table back
 * 600 ms later: a Reactor's bridge entry written meanwhile fails, one written after 1.5 s succeeds.
 */
async function auditPausingStub(t: Parameters<typeof startStub>[0]) {
  let away = false
  t.teardown(async () => {
    if (away) await knex.raw('alter table audit_events_away rename to audit_events')
  })
  return startStub(t, (req, res) => {
    if (req.url !== '/pause') return void res.end('ok')
    void knex.raw('alter table audit_events rename to audit_events_away').then(() => {
      away = true
      setTimeout(() => void knex.raw('alter table audit_events_away rename to audit_events').then(() => (away = false)), 600)
      res.end('paused')
    })
  })
}

/**
 * An acting Application, a caller's key, and code whose bridge `detokenize` fails (the audit table
 * is away) and is caught, then which tokenizes `token` 1.5 s later (the table is back) and returns
 * `answer`.
 */
async function failThenTokenize(t: Parameters<typeof startStub>[0], name: string, token: object, answer: string) {
  const rules = [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:create', 'token:read', 'token:use'] }]
  const actor = await app.request('POST', '/applications', { body: { name: `actor ${name}`, type: 'private', rules } })
  const caller = (await app.request('POST', '/applications', { body: { name: `caller ${name}`, type: 'private', rules } })).body.key as string
  const victim = (await app.request('POST', '/tokens', { key: caller, body: { type: 'card_number', data: '4242424242424242' } })).body.id as string
  const stub = await auditPausingStub(t)
  const code = `module.exports = async (req) => {
    await fetch(${JSON.stringify(stub.origin + '/pause')}, { method: 'POST', body: 'x' })
    try { await req.svc.detokenize('{{ ${victim} }}') } catch (e) {}
    const until = Date.now() + 1500
    while (Date.now() < until) {}
    try { await req.svc.tokenize(${JSON.stringify(token)}) } catch (e) {}
    return ${answer}
  }`
  return { actor: { id: actor.body.id as string }, caller, stub, code }
}

t.test('after a failed bridge entry, a later tokenize of the invocation stores nothing', async (t) => {
  const { actor, caller, code } = await failThenTokenize(t, 'reactor', { type: 'token', data: 'stored-after-failure' }, '{ raw: 1 }')
  const reactor = await app.request('POST', '/reactors', { body: { name: 'r', code, application: actor } })
  t.equal(reactor.status, 201, reactor.text)
  await app.services.audit.flush()
  const count = async () => Number((await knex('tokens').count({ n: '*' }).first())!.n)
  const before = await count()
  const headers = { 'SVC-IDEMPOTENCY-KEY': 'bridge-after-failure' }
  const first = await app.request('POST', `/reactors/${reactor.body.id}/react`, { key: caller, body: { args: {} }, headers })
  await new Promise((r) => setTimeout(r, 800))
  const afterFirst = await count()
  await app.services.audit.flush()
  const rows = await auditRows(app)
  const creates = rows.filter((r) => r.action === 'token.create' && r.parent_id !== null)
  t.equal(first.status, 503)
  t.equal(afterFirst - before, 0, 'no token stored after the invocation failed closed (it was stored with no entry)')
  t.equal(creates.length, 0)
})

t.test('the same in a pre-configured proxy\'s request transform', async (t) => {
  const { actor, caller, stub, code } = await failThenTokenize(t, 'transform', { id: 'transform-stored-after-failure', type: 'token', data: 'x' }, '{ body: { ok: 1 } }')
  const proxy = await app.request('POST', '/proxies', { body: { name: 'p2', destination_url: stub.origin, request_transform: { code }, application: actor } })
  t.equal(proxy.status, 201, proxy.text)
  await app.services.audit.flush()
  const res = await rawRequest(app.url, { method: 'POST', path: '/proxy/x', body: '{}', headers: ['SVC-PROXY-KEY', proxy.body.key, 'SVC-API-KEY', caller, 'Content-Type', 'application/json'] })
  t.equal(res.status, 503)
  await new Promise((r) => setTimeout(r, 800))
  await app.services.audit.flush()
  const stored = await knex('tokens').where({ id: 'transform-stored-after-failure' })
  const entries = (await auditRows(app)).filter((r) => r.target_ids.includes('transform-stored-after-failure'))
  t.equal(stored.length, 0, 'nothing stored')
  t.equal(entries.length, 0)
})

t.test('/proxy writes its entry before it renders anything from the data', async (t) => {
  const stub = await startStub(t)
  const rules = [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:create', 'token:read', 'token:use'] }]
  const key = (await app.request('POST', '/applications', { body: { name: 'k', type: 'private', rules } })).body.key as string
  const plain = (await app.request('POST', '/tokens', { key, body: { type: 'token', data: 'abc' } })).body.id as string
  const withLf = (await app.request('POST', '/tokens', { key, body: { type: 'token', data: 'a\nb' } })).body.id as string
  const asObject = (await app.request('POST', '/tokens', { key, body: { type: 'token', data: { n: '1' } } })).body.id as string
  const call = (headerValue: string) => rawRequest(app.url, { method: 'POST', path: '/proxy', body: 'x', headers: ['SVC-API-KEY', key, 'SVC-PROXY-URL', stub.origin, 'Content-Type', 'application/octet-stream', 'X-Probe', headerValue] })
  await app.services.audit.flush()
  const before = (await auditRows(app)).length
  // With the audit log working: a data-dependent 400 and no entry naming the token.
  const up = { lf: await call(`{{ ${withLf} }}`), obj: await call(`{{ ${asObject} | last4 }}`) }
  t.equal(up.lf.status, 400)
  t.equal(up.obj.status, 400)
  await app.services.audit.flush()
  const rows = (await auditRows(app)).slice(before)
  for (const id of [withLf, asObject]) {
    const request = rows.find((r) => r.action === 'proxy.request' && r.token_ids.includes(id))
    t.ok(request, 'the refused call has its request entry')
    t.match(rows.find((r) => r.action === 'proxy.response' && r.parent_id === request?.id), { status: 400 }, 'and its response entry')
  }
  await knex.raw('alter table audit_events rename to audit_events_away')
  let down: Record<string, { status: number; body: Buffer }>
  try {
    down = { plain: await call(`{{ ${plain} }}`), lf: await call(`{{ ${withLf} }}`), obj: await call(`{{ ${asObject} | last4 }}`), objPlain: await call(`{{ ${asObject} }}`) }
  } finally {
    await knex.raw('alter table audit_events_away rename to audit_events')
  }
  for (const [name, res] of Object.entries(down)) t.equal(res.status, 503, `${name}: the answer does not tell the data apart`)
  t.equal(stub.seen.length, 0)
})

t.test('a create that only found an existing token changed nothing: a failed entry gives its idempotency key up', async (t) => {
  const rules = [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:create', 'token:read'] }]
  const key = (await app.request('POST', '/applications', { body: { name: 'k', type: 'private', rules } })).body.key as string
  const body = { type: 'card_number', data: '4242424242424242', deduplicate_token: true }
  t.equal((await app.request('POST', '/tokens', { key, body })).status, 201)
  const count = async () => Number((await knex('tokens').count({ n: '*' }).first())!.n)
  const before = await count()
  const headers = { 'SVC-IDEMPOTENCY-KEY': 'dedup-only' }
  await app.services.audit.flush()
  await knex.raw('alter table audit_events rename to audit_events_away')
  let first
  try {
    first = await app.request('POST', '/tokens', { key, body, headers })
  } finally {
    await knex.raw('alter table audit_events_away rename to audit_events')
  }
  t.equal(first.status, 503)
  t.equal(await count(), before, 'nothing was stored')
  await app.services.audit.flush()
  const retry = await app.request('POST', '/tokens', { key, body, headers })
  t.equal(retry.status, 201, 'a failure that changed nothing gives its key up (README), so the retry runs')
})

t.test('a session authorization whose entry cannot be written grants nothing: its key was already shown', async (t) => {
  const VISA = '4111111111111111'
  const make = async (type: string, rules: unknown[]) => (await app.request('POST', '/applications', { body: { name: type, type, rules } })).body.key as string
  const reveal = [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:create', 'token:read'] }]
  const publicKey = await make('public', [{ priority: 1, container: '/', transform: 'mask', permissions: ['token:create'] }])
  const privateKey = await make('private', reveal)
  const token = (await app.request('POST', '/tokens', { key: privateKey, body: { id: 'fcp-session-card', type: 'card_number', data: VISA } })).body.id as string
  const session = (await app.request('POST', '/sessions', { key: publicKey })).body as { session_key: string; nonce: string }
  const grant = { nonce: session.nonce, rules: [{ priority: 1, transform: 'reveal', permissions: ['token:read'], conditions: [{ attribute: 'id', operator: 'starts_with', value: 'fcp-' }] }] }
  await app.services.audit.flush()
  await knex.raw('alter table audit_events rename to audit_events_away')
  const headers = { 'SVC-IDEMPOTENCY-KEY': 'authorize-once' }
  let refused
  try {
    refused = await app.request('POST', '/sessions/authorize', { key: privateKey, body: grant, headers })
  } finally {
    await knex.raw('alter table audit_events_away rename to audit_events')
  }
  t.equal(refused.status, 503)
  const read = await app.request('GET', `/tokens/${token}`, { key: session.session_key })
  t.equal(read.status, 403, 'the session holds no grant')
  t.notMatch(JSON.stringify(read.body), VISA)
  const retried = await app.request('POST', '/sessions/authorize', { key: privateKey, body: grant, headers })
  t.equal(retried.status, 200, 'the nonce was not used up: the backend retries, with the same idempotency key')
  t.equal((await app.request('GET', `/tokens/${token}`, { key: session.session_key })).body.data, VISA)
  await app.services.audit.flush()
  const rows = await auditRows(app)
  t.equal(rows.filter((r) => r.action === 'session.authorize').length, 1, 'one authorization, one entry')
})
