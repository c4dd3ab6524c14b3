import t, { type Test } from 'tap'
import type { AuditAction } from '../../src/audit/events.js'
import type { AuditRow } from '../../src/store/index.js'
import type { TestApp } from '../helpers/app.js'
import { auditRows, defaultTenant } from '../helpers/audit.js'
import { rawRequest, startProxyApp } from '../helpers/proxy.js'
import { appKey } from '../helpers/tokens.js'
import { startStub } from '../helpers/stub-server.js'

/**
 * One request per audited path, then its entry: who, what, how, and that no column of any
 * entry carries the card number, a key or a token's data.
 */
const CARD = '4242424242424242'
const LAST4 = '4242'
const ALL_TOKEN = ['token:create', 'token:read', 'token:update', 'token:delete', 'token:search', 'token:use']

const app = await startProxyApp(t)
const stub = await startStub(t)
const tenant = await defaultTenant(app)
const caller = await app.request('POST', '/applications', { body: { name: 'caller', type: 'private', rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ALL_TOKEN }] } })
const key = caller.body.key as string
const callerId = caller.body.id as string
const secrets = [CARD, key, app.adminKey, app.useKey]

/** Entries of `action` written since `since` (a seq), after the writer drained. */
async function entries(action: AuditAction, since: number): Promise<AuditRow[]> {
  await app.services.audit.flush()
  return (await auditRows(app, tenant)).filter((r) => r.action === action && Number(r.seq) > since)
}

async function headSeq(): Promise<number> {
  await app.services.audit.flush()
  return Math.max(0, ...(await auditRows(app, tenant)).map((r) => Number(r.seq)))
}

async function newCard(a: TestApp = app): Promise<string> {
  const res = await a.request('POST', '/tokens', { key, body: { type: 'card_number', data: CARD, containers: ['/pci/'] } })
  if (res.status !== 201) throw new Error(`token create: ${res.status} ${res.text}`)
  return res.body.id as string
}

t.teardown(async () => {
  // Every column of every entry this file wrote, the unattributed chain's included.
  await app.services.audit.flush()
  const all = JSON.stringify(await auditRows(app))
  for (const secret of secrets) if (all.includes(secret)) throw new Error('an audit entry carries a secret or the card number')
})

const noSecret = (t: Test, rows: AuditRow[]) => {
  const text = JSON.stringify(rows)
  for (const secret of secrets) t.notOk(text.includes(secret), 'no column carries the card number or a key')
  t.notOk(text.includes(LAST4 + '"'), 'nor the mask output')
}

t.test('token create, read, list, search (v1 and v2), update, delete, detokenize', async (t) => {
  let since = await headSeq()
  const id = await newCard()
  const [created] = await entries('token.create', since)
  t.match(created, { actor_kind: 'application', actor_id: callerId, target_type: 'token', target_ids: [id], outcome: 'success', status: 201, transform: 'reveal', request_method: 'POST', request_route: '/tokens' })
  noSecret(t, [created!])

  since = await headSeq()
  t.equal((await app.request('GET', `/tokens/${id}`, { key })).body.data, CARD)
  const [read] = await entries('token.read', since)
  t.match(read, { target_ids: [id], transform: 'reveal', status: 200, request_route: '/tokens/:id' })
  t.ok(read!.trace_id, 'the trace id')
  t.equal(read!.client_ip, '127.0.0.1')
  noSecret(t, [read!])

  since = await headSeq()
  t.equal((await app.request('GET', `/tokens?id=${id}`, { key })).status, 200)
  t.equal((await app.request('GET', `/v2/tokens?id=${id}`, { key })).status, 200)
  const lists = await entries('token.list', since)
  t.same(lists.map((r) => [r.request_route, r.target_ids]), [['/tokens', [id]], ['/v2/tokens', [id]]])

  since = await headSeq()
  t.equal((await app.request('POST', '/tokens/search', { key, body: { query: `id:${id}` } })).status, 200)
  t.equal((await app.request('POST', '/v2/tokens/search', { key, body: { query: `id:${id}` } })).status, 200)
  const searches = await entries('token.search', since)
  t.same(searches.map((r) => [r.request_route, r.target_ids]), [['/tokens/search', [id]], ['/v2/tokens/search', [id]]])
  noSecret(t, [...lists, ...searches])

  since = await headSeq()
  t.equal((await app.request('PATCH', `/tokens/${id}`, { key, body: { metadata: { k: 'v' } }, headers: { 'content-type': 'application/merge-patch+json' } })).status, 200)
  t.match(await entries('token.update', since), [{ target_ids: [id], status: 200 }])

  since = await headSeq()
  const detok = await app.request('POST', '/detokenize', { key, body: { n: `{{ ${id} }}` } })
  t.equal(detok.body.n, CARD)
  const [detokenized] = await entries('token.detokenize', since)
  t.match(detokenized, { target_ids: [id], token_ids: [id], status: 200 })
  noSecret(t, [detokenized!])

  since = await headSeq()
  t.equal((await app.request('DELETE', `/tokens/${id}`, { key })).status, 204)
  t.match(await entries('token.delete', since), [{ target_ids: [id], status: 204 }])
})

t.test('a masked read records the transform, not the mask', async (t) => {
  const id = await newCard()
  const masked = await appKey(app, { name: 'masked', type: 'private', rules: [{ priority: 1, container: '/pci/', transform: 'mask', permissions: ['token:read'] }] })
  const since = await headSeq()
  const res = await app.request('GET', `/tokens/${id}`, { key: masked })
  t.equal(res.status, 200)
  t.not(res.body.data, CARD)
  const [read] = await entries('token.read', since)
  t.match(read, { transform: 'mask', target_ids: [id] })
  noSecret(t, [read!])
})

t.test('ephemeral proxy: proxy.request before forwarding, proxy.response after', async (t) => {
  const id = await newCard()
  const since = await headSeq()
  const res = await app.proxy(stub.origin, { method: 'POST', path: '/proxy/charges', body: `{"n":"{{ ${id} }}"}`, headers: ['Content-Type', 'application/json'] })
  t.equal(res.status, 200)
  t.equal(stub.seen.at(-1)!.body.toString(), `{"n":"${CARD}"}`)
  const [request] = await entries('proxy.request', since)
  const [response] = await entries('proxy.response', since)
  t.match(request, { request_route: '/proxy', request_method: 'POST', token_ids: [id], destination_origin: stub.origin, destination_method: 'POST', destination_status: null, target_type: null })
  t.match(response, { parent_id: request!.id, destination_origin: stub.origin, destination_status: 200, status: 200, outcome: 'success' })
  t.type(response!.duration_ms, 'number')
  t.ok(Number(request!.seq) < Number(response!.seq), 'the request entry first')
  noSecret(t, [request!, response!])
})

t.test('a destination answering a status above 599 cannot keep its calls out of the log', async (t) => {
  const odd = await startStub(t, (_req, res) => res.writeHead(799).end('odd'))
  const id = await newCard()
  const since = await headSeq()
  t.equal((await app.proxy(odd.origin, { method: 'POST', body: `{"n":"{{ ${id} }}"}`, headers: ['Content-Type', 'application/json'] })).status, 502)
  t.equal((await app.proxy(odd.origin, { method: 'POST', body: 'plain' })).status, 502)
  t.match(await entries('proxy.response', since), [{ status: 502, outcome: 'failure' }])
  t.match(await entries('proxy.call', since), [{ status: 502, outcome: 'failure' }])
  t.equal(app.services.audit.stats().dropped, 0)
})

t.test('a proxy call that detokenizes nothing: one proxy.call entry when it ends', async (t) => {
  const since = await headSeq()
  const res = await app.proxy(stub.origin, { method: 'POST', path: '/proxy/plain', body: '{"amount":42}', headers: ['Content-Type', 'application/json'] })
  t.equal(res.status, 200)
  await app.services.audit.flush()
  t.same(await entries('proxy.request', since), [], 'no request entry: nothing was revealed')
  t.same(await entries('proxy.response', since), [])
  const [call] = await entries('proxy.call', since)
  t.match(call, { request_route: '/proxy', token_ids: [], destination_origin: stub.origin, destination_method: 'POST', destination_status: 200, status: 200, outcome: 'success', parent_id: null })
  t.type(call!.duration_ms, 'number')
})

t.test('a proxied answer cut after its head is a failure, not the success its status says', async (t) => {
  const cutter = await startStub(t, (_req, res) => {
    res.writeHead(200, { 'Content-Length': '100000' })
    res.write('x'.repeat(1000), () => setTimeout(() => res.socket?.destroy(), 20))
  })
  const since = await headSeq()
  await t.rejects(app.proxy(cutter.origin, { method: 'POST', path: '/proxy/cut', body: 'plain' }), 'the caller sees an aborted answer')
  for (let i = 0; i < 50 && (await entries('proxy.call', since)).length === 0; i++) await new Promise((r) => setTimeout(r, 20))
  t.match(await entries('proxy.call', since), [{ destination_status: 200, status: 200, outcome: 'failure' }])
})

t.test('pre-configured proxy with a request transform that reads a token through its bridge', async (t) => {
  const id = await newCard()
  const actor = await app.request('POST', '/applications', { body: { name: 'proxy actor', type: 'private', rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:use'] }] } })
  const code = `module.exports = async (req) => ({ body: { last4: (await req.svc.detokenize('{{ ${id} }}')).slice(-4), n: req.args.body.n } })`
  const created = await app.request('POST', '/proxies', { body: { name: 'audited', destination_url: stub.origin, request_transform: { code }, application: { id: actor.body.id } } })
  t.equal(created.status, 201)
  const since = await headSeq()
  const res = await rawRequest(app.url, { method: 'POST', path: '/proxy/x', body: `{"n":"{{ ${id} }}"}`, headers: ['SVC-PROXY-KEY', created.body.key, 'SVC-API-KEY', key, 'Content-Type', 'application/json'] })
  t.equal(res.status, 200)
  const [request] = await entries('proxy.request', since)
  t.match(request, { target_type: 'proxy', target_ids: [created.body.id], token_ids: [id], destination_origin: stub.origin })
  const [bridge] = await entries('reactor.token_read', since)
  t.match(bridge, { target_type: 'proxy', target_ids: [created.body.id], token_ids: [id], parent_id: request!.id })
  t.match(await entries('proxy.response', since), [{ parent_id: request!.id, destination_status: 200 }])
  noSecret(t, await entries('proxy.request', since - 1))
})

t.test('Reactor: reactor.invoke with the args\' tokens, reactor.token_read for the bridge', async (t) => {
  const id = await newCard()
  const second = await newCard()
  const actor = await app.request('POST', '/applications', { body: { name: 'reactor actor', type: 'private', rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:use'] }] } })
  const code = `module.exports = async (req) => ({ raw: { a: req.args.n.length, b: (await req.svc.detokenize('{{ ${second} }}')).length } })`
  const reactor = await app.request('POST', '/reactors', { body: { name: 'audited', code, application: { id: actor.body.id } } })
  t.equal(reactor.status, 201)
  const since = await headSeq()
  const res = await app.request('POST', `/reactors/${reactor.body.id}/react`, { key, body: { args: { n: `{{ ${id} }}` } } })
  t.equal(res.status, 200)
  t.same(res.body.raw, { a: 16, b: 16 })
  const [invoke] = await entries('reactor.invoke', since)
  t.match(invoke, { actor_id: callerId, target_type: 'reactor', target_ids: [reactor.body.id], token_ids: [id], request_route: '/reactors/:id/react' })
  t.match(await entries('reactor.token_read', since), [{ target_ids: [reactor.body.id], token_ids: [second], parent_id: invoke!.id }])
  const [result] = await entries('reactor.result', since)
  t.match(result, { target_ids: [reactor.body.id], parent_id: invoke!.id, outcome: 'success', status: 200, token_ids: [] })
  t.type(result!.duration_ms, 'number')
  noSecret(t, [invoke!, result!])
})

t.test('a fetch from Reactor or transform code: reactor.fetch with the destination, recorded before it sends', async (t) => {
  const actor = await app.request('POST', '/applications', { body: { name: 'fetcher', type: 'private', permissions: ['token:use'] } })
  const send = `await fetch(${JSON.stringify(stub.origin + '/elsewhere?card=x')}, { method: 'PUT', body: 'hello' })`
  const reactor = await app.request('POST', '/reactors', { body: { name: 'fetches', code: `module.exports = async () => { ${send}; return { raw: 1 } }`, application: { id: actor.body.id } } })
  const proxy = await app.request('POST', '/proxies', { body: { name: 'fetches', destination_url: stub.origin, request_transform: { code: `module.exports = async (req) => { ${send}; return {} }` }, application: { id: actor.body.id } } })
  secrets.push(proxy.body.key)
  let since = await headSeq()
  t.equal((await app.request('POST', `/reactors/${reactor.body.id}/react`, { key, body: { args: {} } })).status, 200)
  const [invoke] = await entries('reactor.invoke', since)
  t.match(await entries('reactor.fetch', since), [{ target_type: 'reactor', target_ids: [reactor.body.id], parent_id: invoke!.id, destination_origin: stub.origin, destination_method: 'PUT', actor_id: callerId }])
  since = await headSeq()
  const res = await rawRequest(app.url, { method: 'POST', path: '/proxy/x', body: '{}', headers: ['SVC-PROXY-KEY', proxy.body.key, 'SVC-API-KEY', key, 'Content-Type', 'application/json'] })
  t.equal(res.status, 200, res.body.toString())
  const [call] = await entries('proxy.call', since)
  t.match(await entries('reactor.fetch', since), [{ target_type: 'proxy', target_ids: [proxy.body.id], parent_id: call!.id, destination_origin: stub.origin, destination_method: 'PUT' }])
})

t.test('a fetch with a method an entry cannot name is refused: code cannot send data where the log cannot say', async (t) => {
  const actor = await app.request('POST', '/applications', { body: { name: 'odd fetcher', type: 'private', permissions: ['token:use'] } })
  const seenBefore = stub.seen.length
  const code = `module.exports = async () => {
    const out = []
    for (const method of ['PURGE', 'PROPFIND', 'CONNECT', 'get']) {
      try { out.push(method + ':' + (await fetch(${JSON.stringify(stub.origin + '/odd')}, { method, body: 'hello' })).status) } catch (e) { out.push(method + ':' + e.message) }
    }
    return { raw: out }
  }`
  const reactor = await app.request('POST', '/reactors', { body: { name: 'odd methods', code, application: { id: actor.body.id } } })
  const since = await headSeq()
  const res = await app.request('POST', `/reactors/${reactor.body.id}/react`, { key, body: { args: {} } })
  t.equal(res.status, 200, res.text)
  const refused = /fetch method must be one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS/
  t.match(res.body.raw, [refused, refused, refused, /^get:200$/], 'other methods throw inside the code; a lower-case one is its upper-case name')
  t.same(stub.seen.slice(seenBefore).map((s) => s.method), ['GET'], 'nothing else was sent')
  t.match(await entries('reactor.fetch', since), [{ destination_origin: stub.origin, destination_method: 'GET' }], 'the one fetch sent names where it went')
})

t.test('a Reactor that fails: reactor.result holds the status the caller got', async (t) => {
  const reactor = await app.request('POST', '/reactors', { body: { name: 'fails', code: "module.exports = async (req) => { if (req.args.fail) throw new Error('no'); return { raw: 1 } }" } })
  t.equal(reactor.status, 201)
  const since = await headSeq()
  t.equal((await app.request('POST', `/reactors/${reactor.body.id}/react`, { key, body: { args: { fail: true } } })).status, 500)
  const [invoke] = await entries('reactor.invoke', since)
  t.match(await entries('reactor.result', since), [{ target_ids: [reactor.body.id], parent_id: invoke!.id, outcome: 'failure', status: 500 }])
  // Refused before it ran: no invocation, so no result either.
  t.equal((await app.request('POST', `/reactors/${reactor.body.id}/react`, { key, body: { args: '{{ not a token }}' } })).status, 400)
  t.equal((await entries('reactor.result', since)).length, 1)
})

t.test('management changes: Application, session, Reactor, proxy, tenant', async (t) => {
  const since = await headSeq()
  const app1 = await app.request('POST', '/applications', { body: { name: 'a', type: 'private', permissions: ['token:read'] } })
  t.equal((await app.request('PUT', `/applications/${app1.body.id}`, { body: { name: 'b', permissions: ['token:read'] } })).status, 200)
  const regenerated = await app.request('POST', `/applications/${app1.body.id}/regenerate`)
  const extra = await app.request('POST', `/applications/${app1.body.id}/keys`)
  t.equal(extra.status, 201)
  t.equal((await app.request('DELETE', `/applications/${app1.body.id}/keys/${extra.body.id}`)).status, 204)
  await app.request('DELETE', `/applications/${app1.body.id}`)
  const reactor = await app.request('POST', '/reactors', { body: { name: 'r', code: 'module.exports = async () => ({ raw: 1 })' } })
  await app.request('PUT', `/reactors/${reactor.body.id}`, { body: { name: 'r2', code: 'module.exports = async () => ({ raw: 2 })' } })
  await app.request('DELETE', `/reactors/${reactor.body.id}`)
  const proxy = await app.request('POST', '/proxies', { body: { name: 'p', destination_url: stub.origin } })
  await app.request('PUT', `/proxies/${proxy.body.id}`, { body: { name: 'p2', destination_url: stub.origin } })
  await app.request('DELETE', `/proxies/${proxy.body.id}`)
  t.equal((await app.request('PATCH', '/tenants/self', { body: { settings: { ephemeral_proxy_enabled: true } }, headers: { 'content-type': 'application/merge-patch+json' } })).status, 200)

  const expected: [AuditAction, string, number][] = [
    ['application.create', app1.body.id, 201],
    ['application.update', app1.body.id, 200],
    ['application.regenerate_key', app1.body.id, 200],
    ['application.key_create', app1.body.id, 201],
    ['application.key_delete', app1.body.id, 204],
    ['application.delete', app1.body.id, 204],
    ['reactor.create', reactor.body.id, 201],
    ['reactor.update', reactor.body.id, 200],
    ['reactor.delete', reactor.body.id, 204],
    ['proxy.create', proxy.body.id, 201],
    ['proxy.update', proxy.body.id, 200],
    ['proxy.delete', proxy.body.id, 204],
    ['tenant.update', tenant, 200],
  ]
  for (const [action, id, status] of expected) t.match(await entries(action, since), [{ target_ids: [id], status, outcome: 'success', actor_kind: 'application' }], action)
  secrets.push(app1.body.key, regenerated.body.key, extra.body.key, proxy.body.key)
  noSecret(t, (await auditRows(app, tenant)).filter((r) => Number(r.seq) > since))

  const pub = await appKey(app, { name: 'pub', type: 'public', permissions: ['token:create'] })
  const session = await rawRequest(app.url, { method: 'POST', path: '/sessions', headers: ['SVC-API-KEY', pub] })
  t.equal(session.status, 201)
  const authorized = await app.request('POST', '/sessions/authorize', { key, body: { nonce: session.json.nonce, permissions: ['token:create'] } })
  t.equal(authorized.status, 200)
  const [created] = await entries('session.create', since)
  t.match(created, { target_type: 'session', status: 201 })
  t.match(await entries('session.authorize', since), [{ target_ids: created!.target_ids, actor_id: callerId }])
  secrets.push(pub, session.json.session_key, session.json.nonce)
})

t.test('the bootstrap tenant\'s chain opens with its tenant.create and its management Application\'s application.create', async (t) => {
  await app.services.audit.flush()
  const rows = (await auditRows(app, tenant)).slice(0, 2)
  const admin = await app.services.authenticator.authenticate(app.adminKey)
  const operator = { actor_kind: 'operator', actor_id: null, outcome: 'success', status: 201, request_method: null, request_route: null, client_ip: null, trace_id: null }
  t.match(rows, [
    { ...operator, action: 'tenant.create', target_type: 'tenant', target_ids: [tenant] },
    { ...operator, action: 'application.create', target_type: 'application', target_ids: [admin.id] },
  ])
  t.same(rows.map((r) => Number(r.seq)), [1, 2], 'the first two entries of the chain')
  noSecret(t, await auditRows(app, tenant))
  t.ok((await app.services.audit.verify({ tenantId: tenant })).ok)
})

t.test('tenant create by the operator opens the new tenant\'s chain, with its management Application', async (t) => {
  const operatorKey = 'op-'.repeat(12)
  const op = await startProxyApp(t, { SVC_OPERATOR_KEY: operatorKey })
  const res = await op.request('POST', '/tenants', { key: operatorKey, body: { name: 'acme' } })
  t.equal(res.status, 201)
  await op.services.audit.flush()
  const rows = await auditRows(op, res.body.tenant.id)
  const operator = { actor_kind: 'operator', actor_id: null, status: 201, request_route: '/tenants' }
  t.match(rows, [
    { ...operator, action: 'tenant.create', target_type: 'tenant', target_ids: [res.body.tenant.id] },
    { ...operator, action: 'application.create', target_type: 'application', target_ids: [res.body.application.id] },
  ])
  t.same(rows.map((r) => Number(r.seq)), [1, 2], 'the first two entries of the chain')
  t.equal(rows[0]!.occurred_at.getTime(), rows[1]!.occurred_at.getTime(), 'one record call (one time)')
  t.notOk(JSON.stringify(rows).includes(res.body.application.key), 'not the new key')
  t.notOk(JSON.stringify(rows).includes(operatorKey), 'not the operator key')
})

t.test('POST /tokenize: token.create naming every token it stored', async (t) => {
  const since = await headSeq()
  const res = await app.request('POST', '/tokenize', { key, body: { card: { type: 'card_number', data: CARD, containers: ['/pci/'] }, note: 'plain' } })
  t.equal(res.status, 200)
  const [created] = await entries('token.create', since)
  t.match(created, { request_route: '/tokenize', actor_id: callerId, status: 200, transform: 'reveal' })
  t.same([...created!.target_ids].sort(), [res.body.card.id, res.body.note].sort(), 'the full token and the leaf')
  noSecret(t, [created!])
})

t.test('tokens a Reactor stores (req.svc.tokenize, a {tokenize} answer): token.create under its invocation', async (t) => {
  const actor = await app.request('POST', '/applications', { body: { name: 'tokenizing actor', type: 'private', rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:create', 'token:read', 'token:use'] }] } })
  const code = `module.exports = async (req) => {
    const stored = await req.svc.tokenize({ type: 'card_number', data: req.args.n, containers: ['/pci/'] })
    return { raw: { bridged: stored.id }, tokenize: { again: { type: 'card_number', data: req.args.n, containers: ['/pci/'] } } }
  }`
  const reactor = await app.request('POST', '/reactors', { body: { name: 'tokenizer', code, application: { id: actor.body.id } } })
  t.equal(reactor.status, 201)
  const source = await newCard()
  const since = await headSeq()
  const res = await app.request('POST', `/reactors/${reactor.body.id}/react`, { key, body: { args: { n: `{{ ${source} }}` } } })
  t.equal(res.status, 200, res.text)
  const bridged = res.body.raw.bridged as string
  const answered = res.body.tokens.again.id as string
  t.not(bridged, source)
  const [invoke] = await entries('reactor.invoke', since)
  const created = await entries('token.create', since)
  t.same(created.map((r) => r.target_ids), [[bridged], [answered]], 'the bridge call first, then the answer')
  for (const row of created) t.match(row, { parent_id: invoke!.id, actor_id: callerId, target_type: 'token', request_route: '/reactors/:id/react', status: 200 })
  noSecret(t, [invoke!, ...created])
})

t.test('a pre-configured proxy\'s response transform that tokenizes the destination\'s answer: token.create under the call', async (t) => {
  const actor = await app.request('POST', '/applications', { body: { name: 'issuer actor', type: 'private', rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:create', 'token:use'] }] } })
  const code = `module.exports = async (req) => {
    const t = await req.svc.tokenize({ type: 'card_number', data: req.args.body.number, containers: ['/pci/'] })
    return { body: { number: t.id }, headers: req.args.headers, status: req.args.status }
  }`
  const proxy = await app.request('POST', '/proxies', { body: { name: 'issuer', destination_url: stub.origin, response_transform: { code }, application: { id: actor.body.id } } })
  t.equal(proxy.status, 201)
  secrets.push(proxy.body.key)
  const since = await headSeq()
  // The echo destination answers with the card number the caller sent: the transform tokenizes it.
  const res = await rawRequest(app.url, { method: 'POST', path: '/proxy/cards', body: `{"number":"${CARD}"}`, headers: ['SVC-PROXY-KEY', proxy.body.key, 'SVC-API-KEY', key, 'Content-Type', 'application/json'] })
  t.equal(res.status, 200, res.body.toString())
  const tokenId = res.json.number as string
  t.not(tokenId, CARD, 'the caller gets a token id')
  // The request detokenized nothing: the call is one proxy.call entry, noted when it ends.
  const [call] = await entries('proxy.call', since)
  t.match(call, { target_ids: [proxy.body.id], destination_status: 200 })
  t.match(await entries('token.create', since), [{ target_ids: [tokenId], parent_id: call!.id, actor_id: callerId, request_route: '/proxy' }])
  noSecret(t, (await auditRows(app, tenant)).filter((r) => Number(r.seq) > since))
})

t.test('refusals of requests carrying the card number: auth.failed and auth.denied hold only who and where', async (t) => {
  const writeOnly = await appKey(app, { name: 'read only', type: 'private', permissions: ['token:read'] })
  const writeOnlyId = (await app.services.authenticator.authenticate(writeOnly)).id
  const id = await newCard()
  const since = await headSeq()
  const trace = `refusal-${Date.now()}`
  const denied = await app.request('POST', '/tokens', { key: writeOnly, body: { type: 'card_number', data: CARD }, headers: { 'SVC-TRACE-ID': `${trace}-403` } })
  t.equal(denied.status, 403)
  const unknownKey = `key_${CARD}${CARD}${CARD}`
  const failed = await app.request('POST', '/detokenize', { key: unknownKey, body: { n: `{{ ${id} }}`, card: CARD }, headers: { 'SVC-TRACE-ID': `${trace}-401` } })
  t.equal(failed.status, 401)
  secrets.push(writeOnly, unknownKey)
  await app.services.audit.flush()
  const rows = await auditRows(app)
  const refusal = rows.find((r) => r.trace_id === `${trace}-403`)
  t.match(refusal, { tenant_id: tenant, action: 'auth.denied', actor_id: writeOnlyId, outcome: 'denied', status: 403, request_method: 'POST', request_route: '/tokens', permission: 'token:create', target_type: null })
  t.ok(Number(refusal!.seq) > since)
  t.match(rows.find((r) => r.trace_id === `${trace}-401`), { action: 'auth.failed', actor_kind: 'anonymous', actor_id: null, status: 401, request_route: '/detokenize' })
  noSecret(t, rows.filter((r) => r.trace_id?.startsWith(trace)))
})

t.test('a bridge call refused inside a Reactor or a transform is auth.denied under the call, though the code caught it', async (t) => {
  const id = await newCard()
  // The Application the code acts as may use tokens but not store them, and reads only /pci/.
  const actor = await app.request('POST', '/applications', { body: { name: 'narrow actor', type: 'private', rules: [{ priority: 1, container: '/pci/', transform: 'reveal', permissions: ['token:use'] }] } })
  const general = (await app.request('POST', '/tokens', { key, body: { type: 'token', data: CARD } })).body.id as string
  const attempts = `const tried = []
    try { await req.svc.tokenize({ type: 'token', data: 'x' }) } catch (e) { tried.push('store refused') }
    try { await req.svc.detokenize('{{ ${general} }}') } catch (e) { tried.push('read refused') }`
  const reactor = await app.request('POST', '/reactors', { body: { name: 'tries', code: `module.exports = async (req) => { ${attempts}; return { raw: tried } }`, application: { id: actor.body.id } } })
  const proxy = await app.request('POST', '/proxies', {
    body: { name: 'tries', destination_url: stub.origin, request_transform: { code: `module.exports = async (req) => { ${attempts}; return { body: { tried } } }` }, application: { id: actor.body.id } },
  })
  t.equal(reactor.status, 201)
  t.equal(proxy.status, 201)
  secrets.push(proxy.body.key)

  let since = await headSeq()
  const react = await app.request('POST', `/reactors/${reactor.body.id}/react`, { key, body: { args: { n: `{{ ${id} }}` } } })
  t.same(react.body.raw, ['store refused', 'read refused'], react.text)
  const [invoke] = await entries('reactor.invoke', since)
  const denials = await entries('auth.denied', since)
  t.equal(denials.length, 2, 'one entry per refused bridge call')
  for (const row of denials) t.match(row, { actor_id: callerId, target_type: 'reactor', target_ids: [reactor.body.id], parent_id: invoke!.id, outcome: 'denied', status: 403, request_route: '/reactors/:id/react' })

  since = await headSeq()
  const proxied = await rawRequest(app.url, { method: 'POST', path: '/proxy/x', body: '{}', headers: ['SVC-PROXY-KEY', proxy.body.key, 'SVC-API-KEY', key, 'Content-Type', 'application/json'] })
  t.equal(proxied.status, 200, proxied.body.toString())
  const [call] = await entries('proxy.call', since)
  const proxyDenials = await entries('auth.denied', since)
  t.equal(proxyDenials.length, 2)
  for (const row of proxyDenials) t.match(row, { actor_id: callerId, target_type: 'proxy', target_ids: [proxy.body.id], parent_id: call!.id, outcome: 'denied', status: 403, request_route: '/proxy' })
  noSecret(t, (await auditRows(app, tenant)).filter((r) => Number(r.seq) > since))
})

t.test('a refused management call names the permission and the resource', async (t) => {
  const narrow = await appKey(app, { name: 'reads apps', type: 'management', permissions: ['application:read'] })
  const since = await headSeq()
  const res = await app.request('PUT', `/applications/${callerId.toUpperCase()}`, { key: narrow, body: { name: 'renamed', permissions: ['token:read'] } })
  t.equal(res.status, 403)
  secrets.push(narrow)
  t.match(await entries('auth.denied', since), [{ permission: 'application:update', target_type: 'application', target_ids: [callerId], request_route: '/applications/:id' }])
})

t.test('a proxy without require_auth: its entries name the proxy as the actor, not its Application', async (t) => {
  const id = await newCard()
  const actor = await app.request('POST', '/applications', { body: { name: 'open proxy actor', type: 'private', rules: [{ priority: 1, container: '/pci/', transform: 'reveal', permissions: ['token:use'] }] } })
  const proxy = await app.request('POST', '/proxies', { body: { name: 'keyless', destination_url: stub.origin, require_auth: false, application: { id: actor.body.id } } })
  t.equal(proxy.status, 201)
  secrets.push(proxy.body.key)
  const since = await headSeq()
  const res = await rawRequest(app.url, { method: 'POST', path: '/proxy', body: `{"n":"{{ ${id} }}"}`, headers: ['SVC-PROXY-KEY', proxy.body.key, 'Content-Type', 'application/json'] })
  t.equal(res.status, 200)
  const [request] = await entries('proxy.request', since)
  t.match(request, { tenant_id: tenant, actor_kind: 'proxy', actor_id: proxy.body.id, target_ids: [proxy.body.id], token_ids: [id] })
  t.match(await entries('proxy.response', since), [{ actor_kind: 'proxy', actor_id: proxy.body.id, parent_id: request!.id }])

  // A token outside the Application's rules: refused, and the refusal names the proxy too.
  const general = (await app.request('POST', '/tokens', { key, body: { type: 'token', data: CARD } })).body.id as string
  const refused = await rawRequest(app.url, { method: 'POST', path: '/proxy', body: `{"n":"{{ ${general} }}"}`, headers: ['SVC-PROXY-KEY', proxy.body.key, 'Content-Type', 'application/json'] })
  t.equal(refused.status, 403)
  t.match(await entries('auth.denied', since), [{ tenant_id: tenant, actor_kind: 'proxy', actor_id: proxy.body.id, status: 403, request_route: '/proxy' }])
  noSecret(t, (await auditRows(app, tenant)).filter((r) => Number(r.seq) > since))
})

t.test('refusals at a pre-configured proxy name the caller that was refused, in its tenant', async (t) => {
  const proxy = await app.request('POST', '/proxies', { body: { name: 'needs callers', destination_url: stub.origin } })
  t.equal(proxy.status, 201)
  secrets.push(proxy.body.key)
  const publicApp = await app.request('POST', '/applications', { body: { name: 'browser', type: 'public', rules: [{ priority: 1, container: '/general/', transform: 'redact', permissions: ['token:create'] }] } })
  const noUse = await app.request('POST', '/applications', { body: { name: 'no use', type: 'private', permissions: ['token:read'] } })
  secrets.push(publicApp.body.key, noUse.body.key)
  const since = await headSeq()
  const call = (apiKey: string, proxyKey: string) =>
    rawRequest(app.url, { method: 'POST', path: '/proxy', body: '{}', headers: ['SVC-PROXY-KEY', proxyKey, 'SVC-API-KEY', apiKey, 'Content-Type', 'application/json'] })
  const cases: [string, string, string][] = [
    ['a public key', publicApp.body.key, proxy.body.key],
    ['a key without token:use', noUse.body.key, proxy.body.key],
    ['an unknown proxy key', key, `${proxy.body.key.slice(0, -4)}zzzz`],
  ]
  for (const [, apiKey, proxyKey] of cases) t.equal((await call(apiKey, proxyKey)).status, 403)
  const denied = await entries('auth.denied', since)
  t.same(
    denied.map((r) => [r.tenant_id, r.actor_kind, r.actor_id]),
    [publicApp.body.id, noUse.body.id, callerId].map((id) => [tenant, 'application', id]),
    'each refusal in the tenant chain, naming the caller',
  )
  t.same(denied.map((r) => [r.permission, r.target_type, r.target_ids]), [
    ['token:use', 'proxy', [proxy.body.id]],
    ['token:use', 'proxy', [proxy.body.id]],
    ['token:use', null, []],
  ], 'the permission the proxy checks, and the proxy its key names')
  const anonymous = await rawRequest(app.url, { method: 'POST', path: '/proxy', body: '{}', headers: ['SVC-PROXY-KEY', proxy.body.key, 'Content-Type', 'application/json'] })
  t.equal(anonymous.status, 401)
  t.match(await entries('auth.failed', since), [{ tenant_id: tenant, actor_kind: 'anonymous', actor_id: null, target_type: 'proxy', target_ids: [proxy.body.id], permission: 'token:use' }], 'a caller without a key is seen by the tenant whose proxy it tried')
})
