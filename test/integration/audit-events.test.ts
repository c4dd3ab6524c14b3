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
  noSecret(t, [invoke!])
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

t.test('tenant create by the operator opens the new tenant\'s chain', async (t) => {
  const operatorKey = 'op-'.repeat(12)
  const op = await startProxyApp(t, { SVC_OPERATOR_KEY: operatorKey })
  const res = await op.request('POST', '/tenants', { key: operatorKey, body: { name: 'acme' } })
  t.equal(res.status, 201)
  await op.services.audit.flush()
  const rows = await auditRows(op, res.body.tenant.id)
  t.match(rows, [{ action: 'tenant.create', actor_kind: 'operator', actor_id: null, target_ids: [res.body.tenant.id], status: 201 }])
  t.notOk(JSON.stringify(rows).includes(res.body.application.key), 'not the new key')
  t.notOk(JSON.stringify(rows).includes(operatorKey), 'not the operator key')
})
