import http from 'node:http'
import t from 'tap'
import type { TestApp } from '../helpers/app.js'
import { startTestApp } from '../helpers/app.js'
import { assertProxyError, rawRequest, type RawRequest } from '../helpers/proxy.js'
import { startStub } from '../helpers/stub-server.js'
import { appKey, createToken } from '../helpers/tokens.js'

const VISA = '4242424242424242'

async function createProxy(app: TestApp, body: object): Promise<{ id: string; key: string }> {
  const res = await app.request('POST', '/proxies', { body })
  if (res.status !== 201) throw new Error(`creating a proxy failed: ${res.status} ${res.text}`)
  return { id: res.body.id, key: res.body.key }
}

t.test('pre-configured proxies: invocation', async (t) => {
  const app = await startTestApp(t, { SVC_REACTOR_TIMEOUT_MS: '1500' })
  const stub = await startStub(t)
  const decoy = await startStub(t)
  const writer = await appKey(app, { name: 'writer', type: 'private', permissions: ['token:create'] })
  const caller = await appKey(app, {
    name: 'caller',
    type: 'private',
    rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:use', 'token:read'] }],
  })
  const actorRes = await app.request('POST', '/applications', {
    body: { name: 'proxy actor', type: 'private', rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:use', 'token:create'] }] },
  })
  const actor = { id: actorRes.body.id as string, key: actorRes.body.key as string }
  const cardToken = await createToken(app, writer, { type: 'card_number', data: VISA })
  const send = (key: string, req: RawRequest = {}, apiKey: string | null = caller) =>
    rawRequest(app.url, { method: 'POST', path: '/proxy', ...req, headers: ['SVC-PROXY-KEY', key, ...(apiKey === null ? [] : ['SVC-API-KEY', apiKey]), ...(req.headers ?? [])] })

  t.test('require_auth: the caller authenticates; the destination is the proxy\'s own', async (t) => {
    const proxy = await createProxy(app, { name: 'auth', destination_url: `${stub.origin}/base` })
    const res = await send(proxy.key, { path: '/proxy/charges/1?expand=a&b=%2F', body: 'hello', headers: ['SVC-PROXY-URL', decoy.origin, 'Content-Type', 'text/plain'] })
    t.equal(res.status, 200)
    t.equal(res.headers['svc-proxy-destination-status'], '200')
    t.equal(res.body.toString(), 'hello')
    t.equal(stub.seen.at(-1)!.url, '/base/charges/1?expand=a&b=%2F', 'destination_url + path + query')
    t.equal(decoy.seen.length, 0, 'SVC-PROXY-URL is ignored')
    for (const name of ['svc-proxy-key', 'svc-api-key', 'svc-proxy-url']) t.notOk(stub.seen.at(-1)!.headers[name], `${name} not forwarded`)

    assertProxyError(t, await send(proxy.key, {}, null), 401, 'no SVC-API-KEY')
    assertProxyError(t, await send(proxy.key, {}, `key_${'y'.repeat(43)}`), 401, 'unknown SVC-API-KEY')
    assertProxyError(t, await send(proxy.key, {}, app.adminKey), 403, 'management key')
    const noUse = await appKey(app, { name: 'no use', type: 'private', permissions: ['token:read'] })
    assertProxyError(t, await send(proxy.key, {}, noUse), 403, 'private key without token:use')
    assertProxyError(t, await send(`key_${'z'.repeat(43)}`, {}, null), 401, 'unknown SVC-PROXY-KEY alone')
  })

  t.test('detokenization uses the caller\'s rules', async (t) => {
    const proxy = await createProxy(app, { name: 'detok', destination_url: stub.origin, application: { id: actor.id } })
    const body = JSON.stringify({ card: `{{ ${cardToken} }}` })
    const ok = await send(proxy.key, { body, headers: ['Content-Type', 'application/json'] })
    t.equal(ok.status, 200)
    t.same(JSON.parse(stub.seen.at(-1)!.body.toString()), { card: VISA })
    const generalOnly = await appKey(app, { name: 'general', type: 'private', rules: [{ priority: 1, container: '/general/', transform: 'reveal', permissions: ['token:use'] }] })
    const before = stub.seen.length
    assertProxyError(t, await send(proxy.key, { body, headers: ['Content-Type', 'application/json'] }, generalOnly), 403, 'caller may not use the token')
    t.equal(stub.seen.length, before, 'nothing forwarded')
  })

  t.test('without require_auth: no SVC-API-KEY, the proxy\'s Application detokenizes', async (t) => {
    const limited = await app.request('POST', '/applications', {
      body: { name: 'limited actor', type: 'private', rules: [{ priority: 1, container: '/general/', transform: 'reveal', permissions: ['token:use'] }] },
    })
    const open = await createProxy(app, { name: 'open', destination_url: stub.origin, require_auth: false, application: { id: actor.id } })
    const body = JSON.stringify({ card: `{{ ${cardToken} }}` })
    const res = await send(open.key, { body, headers: ['Content-Type', 'application/json'] }, null)
    t.equal(res.status, 200)
    t.same(JSON.parse(stub.seen.at(-1)!.body.toString()), { card: VISA })
    const closed = await createProxy(app, { name: 'open, limited', destination_url: stub.origin, require_auth: false, application: { id: limited.body.id } })
    assertProxyError(t, await send(closed.key, { body, headers: ['Content-Type', 'application/json'] }, null), 403, "the proxy's Application may not use the token")

    // The Application loses the permission: the cached proxy follows at once.
    const revoked = await app.request('PUT', `/applications/${actor.id}`, {
      body: { name: 'proxy actor', rules: [{ priority: 1, container: '/general/', transform: 'reveal', permissions: ['token:use', 'token:create'] }] },
    })
    t.equal(revoked.status, 200)
    assertProxyError(t, await send(open.key, { body, headers: ['Content-Type', 'application/json'] }, null), 403, 'after the Application changed')
    await app.request('PUT', `/applications/${actor.id}`, {
      body: { name: 'proxy actor', rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:use', 'token:create'] }] },
    })
    t.equal((await send(open.key, { body, headers: ['Content-Type', 'application/json'] }, null)).status, 200, 'and back')
  })

  t.test('the tenant\'s ephemeral_proxy_enabled:false does not block pre-configured proxies', async (t) => {
    const proxy = await createProxy(app, { name: 'still on', destination_url: stub.origin })
    const patch = (enabled: boolean) =>
      app.request('PATCH', '/tenants/self', { rawBody: JSON.stringify({ settings: { ephemeral_proxy_enabled: enabled } }), headers: { 'content-type': 'application/merge-patch+json' } })
    t.equal((await patch(false)).status, 200)
    t.teardown(() => patch(true))
    t.equal((await send(proxy.key)).status, 200)
    const ephemeral = await rawRequest(app.url, { path: '/proxy', headers: ['SVC-API-KEY', caller, 'SVC-PROXY-URL', stub.origin] })
    assertProxyError(t, ephemeral, 403, 'the ephemeral proxy is off')
  })

  t.test('request transform rewrites body and headers before detokenization', async (t) => {
    const code = `module.exports = async function (req) {
      const { args, configuration } = req
      const headers = { ...args.headers, 'x-api-version': configuration.VERSION, authorization: 'Bearer ' + configuration.SECRET }
      delete headers['x-drop']
      return {
        body: { wrapped: args.body, method: args.method, path: args.path, query: args.query, saw: Object.keys(args.headers).sort(),
                card_is_expression: args.body.card.startsWith('{{'), card: args.body.card },
        headers,
      }
    }`
    const proxy = await createProxy(app, {
      name: 'rewrite', destination_url: stub.origin, request_transform: { code }, configuration: { VERSION: '2026-11-01', SECRET: 'sk_test' }, application: { id: actor.id },
    })
    const body = JSON.stringify({ card: `{{ ${cardToken} }}`, amount: 10 })
    const res = await send(proxy.key, {
      path: '/proxy/pay?x=1',
      body,
      headers: ['Content-Type', 'application/json', 'X-Drop', 'gone', 'X-Keep', 'kept', 'SVC-PROXY-KEEP-ALIVE', 'timeout=5'],
    })
    t.equal(res.status, 200)
    const seen = stub.seen.at(-1)!
    const sent = JSON.parse(seen.body.toString())
    t.same(sent.wrapped, { card: VISA, amount: 10 }, 'the transform got the body as parsed JSON')
    t.equal(sent.card_is_expression, true, 'with the expressions unresolved: it never sees the plaintext')
    t.equal(sent.card, VISA, 'expressions the transform returns are detokenized after it, with the caller\'s rules')
    t.match(sent, { method: 'POST', path: '/pay', query: 'x=1' })
    t.notOk(sent.saw.some((h: string) => h.startsWith('svc-')), 'SVC-* headers (keys) never reach transform code')
    t.notOk(sent.saw.includes('host') || sent.saw.includes('content-length'), 'nor Host or Content-Length')
    t.equal(seen.headers['x-api-version'], '2026-11-01')
    t.equal(seen.headers.authorization, 'Bearer sk_test')
    t.equal(seen.headers['x-keep'], 'kept')
    t.notOk(seen.headers['x-drop'], 'a header the transform removed is not sent')
    t.equal(seen.headers['content-type'], 'application/json')
    t.equal(seen.headers['content-length'], String(seen.body.length), 'Content-Length recomputed')
    t.equal(seen.headers['keep-alive'], 'timeout=5', "the caller's SVC-PROXY-KEEP-ALIVE is still injected")

    const text = await createProxy(app, {
      name: 'text', destination_url: stub.origin,
      request_transform: { code: "module.exports = async (req) => ({ body: typeof req.args.body + ':' + req.args.body.toUpperCase() })" },
    })
    await send(text.key, { body: 'plain words', headers: ['Content-Type', 'text/plain'] })
    t.equal(stub.seen.at(-1)!.body.toString(), 'string:PLAIN WORDS', 'a text body is passed as text; a left-out headers field keeps them')
    t.equal(stub.seen.at(-1)!.headers['content-type'], 'text/plain')
  })

  t.test('response transform tokenizes a card number before it reaches the caller', async (t) => {
    const issuer = await startStub(t, (_req, res) => {
      res.setHeader('content-type', 'application/json')
      res.setHeader('x-issuer', 'acme')
      res.end(JSON.stringify({ card_number: VISA, status: 'issued' }))
    })
    const code = `module.exports = async function (req) {
      const { args } = req
      const token = await req.svc.tokenize({ type: 'card_number', data: args.body.card_number })
      return { body: { ...args.body, card_number: token.id }, headers: { ...args.headers, 'x-tokenized': 'yes' }, status: 201 }
    }`
    const proxy = await createProxy(app, { name: 'issue', destination_url: issuer.origin, response_transform: { code }, application: { id: actor.id } })
    const res = await send(proxy.key, { body: '{}', headers: ['Content-Type', 'application/json'] })
    t.equal(res.status, 201, 'the status the transform chose')
    t.equal(res.headers['svc-proxy-destination-status'], '200', 'the destination\'s own status')
    t.equal(res.headers['x-issuer'], 'acme')
    t.equal(res.headers['x-tokenized'], 'yes')
    t.equal(res.headers['content-length'], String(res.body.length))
    t.notMatch(res.body.toString(), VISA, 'the caller never sees the number')
    t.equal(res.json.status, 'issued')
    const tokenId = res.json.card_number as string
    t.match(tokenId, /^[0-9a-f-]{36}$/)
    const token = await app.request('GET', `/tokens/${tokenId}`, { key: caller })
    t.equal(token.status, 200, 'the token exists')
    t.equal(token.body.data, VISA, 'and reveals the number to an authorized key')
    t.equal(token.body.created_by, actor.id, "created by the proxy's Application")

    const failing = await startStub(t, (_req, res) => {
      res.statusCode = 402
      res.setHeader('content-type', 'application/json')
      res.end(JSON.stringify({ card_number: VISA }))
    })
    const skip = await createProxy(app, { name: 'non-2xx', destination_url: failing.origin, response_transform: { code }, application: { id: actor.id } })
    const declined = await send(skip.key)
    t.equal(declined.status, 402)
    t.equal(declined.json.card_number, VISA, 'a non-2xx answer passes through untransformed')
  })

  t.test('a response transform cannot speak for Tessera: its SVC-* headers are dropped', async (t) => {
    const code = `module.exports = async (req) => ({ body: 'ok', headers: { 'SVC-Trace-Id': 'forged', 'SVC-Idempotent-Replayed': 'true', 'X-Kept': '1' }, status: 200 })`
    const proxy = await createProxy(app, { name: 'forger', destination_url: stub.origin, response_transform: { code }, application: { id: actor.id } })
    const res = await send(proxy.key, { headers: ['SVC-TRACE-ID', 'mine'] })
    t.equal(res.status, 200)
    t.equal(res.headers['svc-trace-id'], 'mine')
    t.notOk(res.headers['svc-idempotent-replayed'])
    t.equal(res.headers['x-kept'], '1')
  })

  t.test('update takes effect at once; delete stops the key', async (t) => {
    const other = await startStub(t)
    const proxy = await createProxy(app, { name: 'moving', destination_url: stub.origin })
    t.equal((await send(proxy.key)).status, 200)
    const before = stub.seen.length
    const moved = await app.request('PUT', `/proxies/${proxy.id}`, {
      body: { name: 'moving', destination_url: `${other.origin}/v2`, request_transform: { code: "module.exports = async () => ({ body: 'v2' })" } },
    })
    t.equal(moved.status, 200)
    const res = await send(proxy.key, { path: '/proxy/x' })
    t.equal(res.status, 200)
    t.equal(other.seen.at(-1)!.url, '/v2/x', 'the new destination')
    t.equal(other.seen.at(-1)!.body.toString(), 'v2', 'the new transform')
    t.equal(stub.seen.length, before)
    await app.request('PUT', `/proxies/${proxy.id}`, { body: { name: 'moving', destination_url: other.origin, require_auth: false, application: { id: actor.id } } })
    t.equal((await send(proxy.key, {}, null)).status, 200, 'require_auth turned off at once')
    t.equal((await app.request('DELETE', `/proxies/${proxy.id}`)).status, 204)
    assertProxyError(t, await send(proxy.key, {}, null), 401, 'deleted, key alone')
    assertProxyError(t, await send(proxy.key), 403, 'deleted, beside a valid caller')
  })
})

t.test('a caller that leaves before the destination answers does not take the process down', async (t) => {
  const app = await startTestApp(t)
  const caller = await appKey(app, { name: 'caller', type: 'private', permissions: ['token:use'] })
  let release!: () => void
  const released = new Promise<void>((resolve) => (release = resolve))
  let arrived!: () => void
  const arrival = new Promise<void>((resolve) => (arrived = resolve))
  const slow = await startStub(t, (_req, res) => {
    arrived()
    void released.then(() => res.end('late'))
  })
  const proxy = await createProxy(app, { name: 'slow', destination_url: slow.origin })
  const url = new URL(app.url)
  for (const headers of [{ 'SVC-PROXY-KEY': proxy.key, 'SVC-API-KEY': caller }, { 'SVC-PROXY-URL': slow.origin, 'SVC-API-KEY': caller }]) {
    const gone = http.request({ host: url.hostname, port: url.port, method: 'GET', path: '/proxy', headers, agent: false })
    gone.on('error', () => {})
    gone.end()
    await arrival
    gone.destroy()
    // One more round trip, so the server has seen the caller go before the destination answers.
    await app.request('GET', '/healthz', { key: null })
  }
  release()
  const after = await rawRequest(app.url, { path: '/proxy', headers: ['SVC-PROXY-KEY', proxy.key, 'SVC-API-KEY', caller] })
  t.equal(after.status, 200, 'the process is still up and answering')
  t.equal(after.body.toString(), 'late')
})

t.test('pre-configured proxies: transform failures', async (t) => {
  const app = await startTestApp(t, { SVC_REACTOR_TIMEOUT_MS: '1000' })
  const stub = await startStub(t)
  const caller = await appKey(app, { name: 'caller', type: 'private', permissions: ['token:use'] })
  const send = (key: string) => rawRequest(app.url, { method: 'POST', path: '/proxy', body: '{"a":1}', headers: ['SVC-PROXY-KEY', key, 'SVC-API-KEY', caller, 'Content-Type', 'application/json'] })
  const proxyWith = async (field: 'request_transform' | 'response_transform', code: string) => {
    const res = await app.request('POST', '/proxies', { body: { name: field, destination_url: stub.origin, [field]: { code } } })
    if (res.status !== 201) throw new Error(`${res.status} ${res.text}`)
    return res.body.key as string
  }

  t.test('request transform: the destination is never called', async (t) => {
    const cases: [string, string, number, RegExp][] = [
      ['throws', "module.exports = async () => { throw new Error('boom in transform') }", 500, /request transform failed: .*boom in transform/],
      ['BadRequestError', "module.exports = async () => { throw new BadRequestError('amount is required') }", 400, /amount is required/],
      ['never ends', 'module.exports = async () => { while (true) {} }', 504, /request transform failed/],
      ['returns a number', 'module.exports = async () => 42', 500, /malformed/],
      ['returns headers as a string', "module.exports = async () => ({ headers: 'x' })", 500, /headers/],
      ['returns a header with CR LF', "module.exports = async () => ({ headers: { 'x-a': 'a\\r\\nx-b: b' } })", 500, /control character/],
      ['returns a header value outside Latin-1', "module.exports = async () => ({ headers: { 'x-a': '\\u20ac' } })", 500, /outside Latin-1/],
      ['returns a bad header name', "module.exports = async () => ({ headers: { 'bad name': 'a' } })", 500, /header name/],
    ]
    for (const [label, code, status, detail] of cases) {
      const res = await send(await proxyWith('request_transform', code))
      assertProxyError(t, res, status, label)
      t.match(res.json.proxy_error.detail, detail, `${label}: detail`)
    }
    t.equal(stub.seen.length, 0, 'no request reached the destination')
    const answered = await send(await proxyWith('request_transform', "module.exports = async () => { throw new CustomHttpResponseError({ status: 422, headers: { 'x-why': 'rule' }, body: { error: 'declined' } }) }"))
    t.equal(answered.status, 422, 'CustomHttpResponseError answers the caller directly')
    t.equal(answered.headers['x-why'], 'rule')
    t.same(answered.json, { error: 'declined' })
    t.notOk(answered.headers['svc-proxy-destination-status'])
    const forged = await send(await proxyWith('request_transform', "module.exports = async () => { throw new CustomHttpResponseError({ status: 200, headers: { 'SVC-PROXY-DESTINATION-STATUS': '200' }, body: {} }) }"))
    t.equal(forged.status, 200)
    t.notOk(forged.headers['svc-proxy-destination-status'], 'a transform cannot claim the destination answered')
    t.equal(stub.seen.length, 0)
  })

  t.test('response transform: proxy_error, with the destination status (the destination did answer)', async (t) => {
    const cases: [string, string, number][] = [
      ['throws', "module.exports = async () => { throw new Error('late boom') }", 500],
      ['never ends', 'module.exports = async () => { for (;;) {} }', 504],
      ['returns a string', "module.exports = async () => 'nope'", 500],
      ['returns a bad status', 'module.exports = async (req) => ({ status: 99 })', 500],
    ]
    for (const [label, code, status] of cases) {
      const before = stub.seen.length
      const res = await send(await proxyWith('response_transform', code))
      t.equal(res.status, status, `${label}: status`)
      t.match(res.json, { proxy_error: { status } }, `${label}: proxy_error`)
      t.equal(res.headers['svc-proxy-destination-status'], '200', `${label}: the destination answered 200`)
      t.equal(stub.seen.length, before + 1, `${label}: the destination was called once`)
    }
    t.equal((await send(await proxyWith('response_transform', 'module.exports = async (req) => ({ body: { ok: req.args.body.a } })'))).json.ok, 1, 'and the app still works')
  })
})
