import { randomUUID } from 'node:crypto'
import t from 'tap'
import { UNATTRIBUTED_TENANT } from '../../src/audit/events.js'
import { startTestApp } from '../helpers/app.js'
import { auditEvent, auditLogWithClock, auditRows, defaultTenant } from '../helpers/audit.js'
import { appKey } from '../helpers/tokens.js'

const OPERATOR_KEY = 'operator-key-for-tests-0123456789abcdef'
const app = await startTestApp(t, { SVC_OPERATOR_KEY: OPERATOR_KEY })
const tenant = await defaultTenant(app)
const readerKey = await appKey(app, { name: 'auditor', type: 'management', permissions: ['log:read'] })
const reader = (await app.services.authenticator.authenticate(readerKey)).id
// Creating the reader key is itself an entry (application.create): the events below follow it.
await app.services.audit.flush()
const b = (await auditRows(app, tenant)).length
const list = (query = '') => app.request('GET', `/logs${query}`, { key: readerKey })

// A spread of events to filter: 30 token reads, 5 denied updates by one actor, one proxy call.
const actor = randomUUID()
const tokenId = 'tok_audit_target'
const proxyId = randomUUID()
const start = new Date()
for (let i = 0; i < 30; i++) await app.services.audit.record([auditEvent(tenant)])
await app.services.audit.record(Array.from({ length: 5 }, () => auditEvent(tenant, { action: 'token.update', actor: { kind: 'session', id: actor }, outcome: 'denied', status: 403, target: { type: 'token', ids: [tokenId] } })))
await app.services.audit.record([
  auditEvent(tenant, {
    action: 'proxy.request', target: { type: 'proxy', ids: [proxyId] }, tokenIds: [tokenId, 'tok_other'], transform: undefined,
    destination: { origin: 'https://api.example.com', method: 'POST', status: 201 }, durationMs: 42, request: { method: 'POST', route: '/proxy' },
  }),
])
// Another tenant's events never show.
await app.services.audit.record([auditEvent(randomUUID(), { target: { type: 'token', ids: [tokenId] } })])
const end = new Date(Date.now() + 1)

t.test('newest first, with every field an id, a code, a number or a time', async (t) => {
  const res = await list('?size=1')
  t.equal(res.status, 200)
  t.equal(res.body.data.length, 1)
  t.match(res.body.data[0], {
    id: String, seq: b + 36, time: String, tenant_id: tenant, actor: { kind: 'application', id: String }, action: 'proxy.request',
    target: { type: 'proxy', ids: [proxyId] }, outcome: 'success', status: 200, trace_id: String, client_ip: '127.0.0.1',
    request: { method: 'POST', route: '/proxy' }, token_ids: [tokenId, 'tok_other'], destination: { origin: 'https://api.example.com', method: 'POST', status: 201 },
    duration_ms: 42, hash: /^[0-9a-f]{64}$/,
  })
  t.type(res.body.pagination.next_cursor, 'string')
  t.equal(res.body.pagination.page_size, 1)
})

t.test('cursor pagination walks every entry once, newest first', async (t) => {
  const seen: number[] = []
  let cursor: string | undefined
  do {
    const res = await list(`?size=7${cursor ? `&cursor=${cursor}` : ''}`)
    t.equal(res.status, 200)
    seen.push(...res.body.data.map((e: { seq: number }) => e.seq))
    cursor = res.body.pagination.next_cursor
  } while (cursor)
  const own = seen.filter((s) => s <= b + 36)
  t.same(own.slice(0, b + 36), Array.from({ length: b + 36 }, (_, i) => b + 36 - i))
  t.equal(new Set(seen).size, seen.length, 'no entry twice')
})

t.test('filters: action, actor, target (also detokenized tokens), outcome, time', async (t) => {
  const seqs = async (q: string) => (await list(q)).body.data.map((e: { seq: number }) => e.seq)
  t.same(await seqs('?action=token.update&size=100'), [b + 35, b + 34, b + 33, b + 32, b + 31])
  t.same(await seqs('?action=token.update&action=proxy.request&size=100'), [b + 36, b + 35, b + 34, b + 33, b + 32, b + 31])
  t.same(await seqs(`?actor_id=${actor}&size=100`), [b + 35, b + 34, b + 33, b + 32, b + 31])
  t.same(await seqs('?actor_kind=session&outcome=denied&size=3'), [b + 35, b + 34, b + 33])
  t.same(await seqs(`?target_id=${tokenId}&size=100`), [b + 36, b + 35, b + 34, b + 33, b + 32, b + 31], 'as target and as detokenized token')
  t.same(await seqs(`?target_type=proxy&target_id=${proxyId}`), [b + 36])
  t.same(await seqs(`?target_id=${proxyId.toUpperCase()}`), [b + 36], 'a uuid in either case')
  t.same(await seqs(`?from=${end.toISOString()}&action=token.read`), [], 'nothing read after the end')
  const all = await seqs(`?from=${start.toISOString()}&to=${end.toISOString()}&size=100`)
  t.ok(all.includes(b + 1) && all.includes(b + 36))
})

t.test('malformed filters are 400 problem+json naming the parameter', async (t) => {
  const cases: [string, string][] = [
    ['?from=yesterday', 'from'],
    ['?to=2026-13-45T00:00:00Z', 'to'],
    ['?action=token.peek', 'action'],
    ['?action=token.read&action=nope', 'action'],
    ['?outcome=maybe', 'outcome'],
    ['?actor_id=not-a-uuid', 'actor_id'],
    ['?actor_kind=user', 'actor_kind'],
    ['?target_type=card', 'target_type'],
    ['?cursor=garbage', 'cursor'],
    [`?cursor=${Buffer.from('1_2x').toString('base64url')}`, 'cursor'],
    ['?size=0', 'size'],
    ['?size=101', 'size'],
    ['?from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z', 'to'],
    ['?from=2026-01-01T00:00:00Z&from=2026-01-02T00:00:00Z', 'from'],
    ['?page=2', 'page'],
  ]
  for (const [query, field] of cases) {
    const res = await list(query)
    t.equal(res.status, 400, query)
    t.match(res.headers.get('content-type'), /application\/problem\+json/)
    t.ok(res.body.errors?.[field], `${query} names ${field}: ${JSON.stringify(res.body.errors)}`)
  }
})

t.test('log:read on a management key is required', async (t) => {
  const other = await appKey(app, { name: 'apps only', type: 'management', permissions: ['application:read'] })
  const privateKey = await appKey(app, { name: 'backend', type: 'private', permissions: ['token:read'] })
  t.equal((await app.request('GET', '/logs', { key: other })).status, 403)
  t.equal((await app.request('GET', '/logs', { key: privateKey })).status, 403)
  t.equal((await app.request('GET', '/logs', { key: null })).status, 401)
  t.equal((await app.request('GET', '/logs/export?from=2026-01-01T00:00:00Z', { key: other })).status, 403)
})

t.test('NDJSON export: oldest first, every entry of the range, in chunks', async (t) => {
  const many = randomUUID()
  await app.services.audit.record(Array.from({ length: 1201 }, () => auditEvent(many)))
  // The export is per tenant; read this tenant's through a key of a tenant made for it.
  const created = await app.request('POST', '/tenants', { key: OPERATOR_KEY, body: { name: `export-${many.slice(0, 8)}` } })
  t.equal(created.status, 201)
  const ownTenant = created.body.tenant.id as string
  await app.services.audit.record(Array.from({ length: 1201 }, () => auditEvent(ownTenant)))
  const key = await (async () => {
    const res = await app.request('POST', '/applications', { key: created.body.application.key, body: { name: 'siem', type: 'management', permissions: ['log:read'] } })
    return res.body.key as string
  })()
  const res = await app.request('GET', `/logs/export?from=${start.toISOString()}`, { key })
  t.equal(res.status, 200)
  t.match(res.headers.get('content-type'), /application\/x-ndjson/)
  t.equal(res.headers.get('transfer-encoding'), 'chunked', 'streamed as it is read, not buffered whole')
  t.equal(res.headers.get('content-length'), null)
  const lines = res.text.trimEnd().split('\n').map((l) => JSON.parse(l) as { seq: number; tenant_id: string })
  const ownSeqs = lines.filter((l) => l.tenant_id === ownTenant).map((l) => l.seq)
  t.same(ownSeqs.slice(0, 1201), Array.from({ length: 1201 }, (_, i) => i + 1), 'all of them, oldest first')
  t.ok(lines.every((l) => l.tenant_id === ownTenant), 'only its own tenant')

  const empty = await app.request('GET', '/logs/export?from=2020-01-01T00:00:00Z&to=2021-01-01T00:00:00Z', { key: readerKey })
  t.equal(empty.status, 200)
  t.equal(empty.text, '')
  const bad = await app.request('GET', '/logs/export', { key: readerKey })
  t.equal(bad.status, 400)
  t.ok(bad.body.errors.from)
  const badTo = await app.request('GET', '/logs/export?from=2026-01-01T00:00:00Z&to=soon', { key: readerKey })
  t.ok(badTo.body.errors.to)
})

t.test('NDJSON export by after_seq: a SIEM resumes without missing an entry that committed late', async (t) => {
  const created = await app.request('POST', '/tenants', { key: OPERATOR_KEY, body: { name: `resume-${randomUUID().slice(0, 8)}` } })
  const ownTenant = created.body.tenant.id as string
  const key = (await app.request('POST', '/applications', { key: created.body.application.key, body: { name: 'siem', type: 'management', permissions: ['log:read'] } })).body.key as string
  const exported = async (query: string) => {
    const res = await app.request('GET', `/logs/export?${query}`, { key })
    t.equal(res.status, 200, res.text)
    // Each export is itself an entry (log.export), noted in the background: those are left out.
    return res.text.trimEnd().split('\n').filter(Boolean).map((l) => JSON.parse(l) as { seq: number; time: string; action: string }).filter((e) => e.action !== 'log.export')
  }
  await app.services.audit.flush()
  const first = await exported('after_seq=0')
  t.ok(first.length > 0, 'the tenant\'s first entries')
  t.same(first.map((e) => e.seq), first.map((_, i) => i + 1), 'in chain order from 1 (nothing before was exported)')
  const last = first.at(-1)!

  // An entry stamped when it was queued, a minute before the last one exported, commits now.
  const late = auditLogWithClock(app, () => new Date(Date.parse(last.time) - 60_000))
  t.teardown(() => late.close())
  await late.record([auditEvent(ownTenant, { action: 'token.delete' })])
  // Its seq follows the first export's own log.export entry when that was written first.
  const lateSeq = Number((await auditRows(app, ownTenant)).find((r) => r.action === 'token.delete')!.seq)
  t.ok(lateSeq > last.seq)
  t.notOk((await exported(`from=${last.time}`)).some((e) => e.seq === lateSeq), 'resuming by time misses it')
  t.same((await exported(`after_seq=${last.seq}`)).map((e) => e.seq), [lateSeq], 'resuming by seq does not')
  t.same((await exported(`after_seq=0&action=token.delete`)).map((e) => e.seq), [lateSeq], 'filters apply')
  t.same(await exported(`after_seq=${lateSeq}`), [], 'nothing after the head')

  const missing = await app.request('GET', '/logs/export', { key })
  t.equal(missing.status, 400)
  t.match(missing.body.errors, { from: [/unless after_seq/] })
  for (const bad of ['-1', '1.5', 'x', '9007199254740992']) {
    const res = await app.request('GET', `/logs/export?after_seq=${bad}`, { key })
    t.equal(res.status, 400, bad)
    t.ok(res.body.errors.after_seq, `${bad}: names after_seq`)
  }
})

t.test('reading the log, and refusals, are themselves audited', async (t) => {
  const traceId = `trace-${randomUUID()}`
  await app.request('GET', '/logs', { key: readerKey, headers: { 'SVC-TRACE-ID': traceId } })
  const privateKey = await appKey(app, { name: 'nosy', type: 'private', permissions: ['token:read'] })
  const privateId = (await app.services.authenticator.authenticate(privateKey)).id
  await app.request('GET', '/logs', { key: privateKey, headers: { 'SVC-TRACE-ID': `${traceId}-403` } })
  await app.request('GET', '/applications', { key: 'key_0123456789abcdefghijklmnopqrstuvwxyzABCD', headers: { 'SVC-TRACE-ID': `${traceId}-401` } })
  await app.services.audit.flush()

  const rows = await auditRows(app)
  t.match(rows.find((r) => r.trace_id === traceId), { tenant_id: tenant, action: 'log.read', actor_kind: 'application', actor_id: reader, target_type: 'log', request_route: '/logs', status: 200 })
  t.match(rows.find((r) => r.trace_id === `${traceId}-403`), { tenant_id: tenant, action: 'auth.denied', actor_id: privateId, outcome: 'denied', status: 403, request_method: 'GET', request_route: '/logs' })
  t.match(rows.find((r) => r.trace_id === `${traceId}-401`), { tenant_id: UNATTRIBUTED_TENANT, action: 'auth.failed', actor_kind: 'anonymous', actor_id: null, status: 401 })
  const denied = await list('?action=auth.denied')
  t.ok(denied.body.data.some((e: { actor: { id: string } }) => e.actor.id === privateId), 'refusals show in the tenant log')
  t.ok((await app.services.audit.verify()).ok, 'and every chain, the unattributed one included, verifies')
})

t.test('no column ever holds a key or token data', async (t) => {
  const card = '4111111111111111'
  const privateKey = await appKey(app, { name: 'writer', type: 'private', permissions: ['token:create', 'token:read'] })
  const created = await app.request('POST', '/tokens', { key: privateKey, body: { type: 'card_number', data: card } })
  t.equal(created.status, 201)
  await app.request('GET', `/tokens/${created.body.id}`, { key: 'key_0123456789abcdefghijklmnopqrstuvwxyzWXYZ' })
  await app.request('GET', '/logs', { key: privateKey })
  await app.services.audit.flush()
  const everything = JSON.stringify(await app.services.store.db.knex('audit_events').select('*'))
  for (const secret of [card, privateKey, readerKey, app.adminKey, 'key_0123456789abcdefghijklmnopqrstuvwxyzWXYZ']) t.notOk(everything.includes(secret))
})
