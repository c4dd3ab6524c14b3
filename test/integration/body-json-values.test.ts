import { randomUUID } from 'node:crypto'
import t from 'tap'
import { assertProxyError, startProxyApp } from '../helpers/proxy.js'
import { startStub } from '../helpers/stub-server.js'
import { appKey } from '../helpers/tokens.js'

// A 5 MB body of `{},` parsed to over 100 MB and blocked the event loop for seconds; the same
// shape as Reactor args took down the runtime child for every tenant. Bodies were bounded in
// bytes and depth, never in values.
const BOUND = 100_000
const app = await startProxyApp(t)
const stub = await startStub(t)
const publicKey = await appKey(app, { type: 'public', permissions: ['token:create'] })
const writer = await appKey(app, { type: 'private', permissions: ['token:create'] })
const secret = (await app.request('POST', '/tokens', { key: writer, body: { type: 'token', data: 'x' } })).body.id as string

/** `{"type":"token","data":[{},…]}` holding `values` JSON values in all (the object, "token", the array, its items). */
const tokenBody = (values: number) => `{"type":"token","data":[${'{},'.repeat(values - 4)}{}]}`
const refusal = { type: '/problems/validation', status: 400, detail: `The JSON body holds more than ${BOUND} values.`, errors: { body: [`must hold at most ${BOUND} JSON values`] } }

t.test('POST /tokens with a public key: one value past the bound is a 400 naming body, the bound itself is fine', async (t) => {
  const over = await app.request('POST', '/tokens', { key: publicKey, rawBody: tokenBody(BOUND + 1), headers: { 'content-type': 'application/json' } })
  t.equal(over.status, 400)
  t.match(over.headers.get('content-type'), 'application/problem+json')
  t.match(over.body, refusal)
  const at = await app.request('POST', '/tokens', { key: publicKey, rawBody: tokenBody(BOUND), headers: { 'content-type': 'application/json' } })
  t.equal(at.status, 201)
})

t.test('a text body parsed as JSON and a body read first by the idempotency middleware are bounded too', async (t) => {
  const text = await app.request('POST', '/tokens', { key: publicKey, rawBody: tokenBody(BOUND + 1), headers: { 'content-type': 'text/plain' } })
  t.equal(text.status, 400)
  t.match(text.body, refusal)
  const keyed = await app.request('POST', '/tokens', { key: writer, rawBody: tokenBody(BOUND + 1), headers: { 'content-type': 'application/json', 'SVC-IDEMPOTENCY-KEY': randomUUID() } })
  t.equal(keyed.status, 400)
  t.match(keyed.body, refusal)
})

t.test('Reactor args: the react route larger byte limit does not lift the bound (refused before the Reactor is looked up)', async (t) => {
  const args = `{"args":[${'0,'.repeat(BOUND)}0]}`
  const res = await app.request('POST', `/reactors/${randomUUID()}/react`, { key: app.useKey, rawBody: args, headers: { 'content-type': 'application/json' } })
  t.equal(res.status, 400)
  t.match(res.body, refusal)
})

t.test('/proxy: a body declared JSON is bounded as a proxy_error and never forwarded; other bodies go as they are', async (t) => {
  const wide = `{"card":"{{ ${secret} }}","items":[${'1,'.repeat(BOUND)}1]}`
  const before = stub.seen.length
  const json = await app.proxy(stub.origin, { method: 'POST', body: wide, headers: ['Content-Type', 'application/json'] })
  assertProxyError(t, json, 400)
  t.match(json.json, { proxy_error: refusal })
  t.equal(stub.seen.length, before, 'nothing forwarded')
  const plain = await app.proxy(stub.origin, { method: 'POST', body: wide, headers: ['Content-Type', 'application/octet-stream'] })
  t.equal(plain.status, 200, 'an opaque body is not parsed, so not counted')
})
