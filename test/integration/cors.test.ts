import t from 'tap'
import { startProxyApp } from '../helpers/proxy.js'
import { startTestApp } from '../helpers/app.js'
import { startStub } from '../helpers/stub-server.js'
import { appKey, card } from '../helpers/tokens.js'

const SHOP = 'https://shop.example.com'
const preflight = (origin: string, method = 'POST', headers = 'svc-api-key,content-type') => ({
  key: null,
  headers: { Origin: origin, 'Access-Control-Request-Method': method, 'Access-Control-Request-Headers': headers },
})

t.test('without SVC_CORS_ORIGINS no answer carries a CORS header', async (t) => {
  const app = await startTestApp(t)
  const pre = await app.request('OPTIONS', '/tokens', preflight(SHOP))
  t.equal(pre.headers.get('access-control-allow-origin'), null)
  t.equal(pre.headers.get('access-control-allow-methods'), null)
  const res = await app.request('GET', '/applications', { headers: { Origin: SHOP } })
  t.equal(res.status, 200)
  t.equal(res.headers.get('access-control-allow-origin'), null)
  t.notMatch(res.headers.get('vary') ?? '', /origin/i)
})

t.test('an allowed origin: preflight, answers and problems', async (t) => {
  const app = await startTestApp(t, { SVC_CORS_ORIGINS: `${SHOP}, http://localhost:8080` })
  const publicKey = await appKey(app, { type: 'public', rules: [{ description: 'collect', priority: 1, container: '/cards/', transform: 'redact', permissions: ['token:create'] }] })

  t.test('the preflight is answered 204 with the methods, the asked headers and no credentials', async (t) => {
    const pre = await app.request('OPTIONS', '/tokens', preflight(SHOP))
    t.equal(pre.status, 204)
    t.equal(pre.headers.get('access-control-allow-origin'), SHOP)
    t.match(pre.headers.get('access-control-allow-methods'), /POST/)
    t.match(pre.headers.get('access-control-allow-methods'), /PATCH/)
    t.equal(pre.headers.get('access-control-allow-headers'), 'svc-api-key,content-type')
    t.equal(pre.headers.get('access-control-max-age'), '600')
    t.equal(pre.headers.get('access-control-allow-credentials'), null, 'keys travel in a header, never in cookies')
    t.match(pre.headers.get('vary'), /Origin/)
    t.equal(pre.text, '')
  })

  t.test('another origin, or one differing in scheme or port, gets no CORS header', async (t) => {
    for (const origin of ['https://evil.example', 'http://shop.example.com', 'https://shop.example.com:8443', 'null']) {
      const pre = await app.request('OPTIONS', '/tokens', preflight(origin))
      t.equal(pre.headers.get('access-control-allow-origin'), null, origin)
      t.equal(pre.headers.get('access-control-allow-methods'), null, origin)
      const res = await app.request('POST', '/tokens', { key: publicKey, headers: { Origin: origin }, body: { type: 'card', data: card(), containers: ['/cards/'] } })
      t.equal(res.status, 201, 'the request itself is not refused: only the page cannot read it')
      t.equal(res.headers.get('access-control-allow-origin'), null, origin)
      t.match(res.headers.get('vary'), /Origin/, 'an answer that depends on Origin says so')
    }
  })

  t.test('a public key creates a token from the page and reads its own headers', async (t) => {
    const res = await app.request('POST', '/tokens', { key: publicKey, headers: { Origin: SHOP }, body: { type: 'card', data: card(), containers: ['/cards/'] } })
    t.equal(res.status, 201)
    t.equal(res.headers.get('access-control-allow-origin'), SHOP)
    t.match(res.headers.get('access-control-expose-headers'), /RateLimit-Remaining/)
    t.match(res.headers.get('access-control-expose-headers'), /SVC-Trace-Id/)
    t.equal(res.headers.get('access-control-allow-credentials'), null)
    t.equal(res.headers.get('cache-control'), 'no-store')
  })

  t.test('problems carry the headers too, so the page can read why', async (t) => {
    const bad = await app.request('POST', '/tokens', { key: 'tsr_pub_notakey', headers: { Origin: SHOP }, body: {} })
    t.equal(bad.status, 401)
    t.equal(bad.headers.get('access-control-allow-origin'), SHOP)
    t.match(bad.headers.get('content-type'), /problem\+json/)
    const refused = await app.request('GET', '/applications', { key: publicKey, headers: { Origin: SHOP } })
    t.equal(refused.status, 403)
    t.equal(refused.headers.get('access-control-allow-origin'), SHOP)
    const missing = await app.request('GET', '/no-such-route', { headers: { Origin: 'http://localhost:8080' } })
    t.equal(missing.status, 404)
    t.equal(missing.headers.get('access-control-allow-origin'), 'http://localhost:8080')
  })

  t.test('an OPTIONS that is not a preflight is the router\'s answer', async (t) => {
    const res = await app.request('OPTIONS', '/tokens', { key: null, headers: { Origin: SHOP } })
    t.equal(res.status, 200)
    t.match(res.headers.get('allow'), /POST/)
  })
})

t.test('a 429 carries the headers, so the page can read Retry-After', async (t) => {
  const app = await startTestApp(t, { SVC_CORS_ORIGINS: '*', SVC_RATE_LIMIT_GLOBAL: '2/60' })
  const statuses: number[] = []
  let last
  for (let i = 0; i < 3; i++) {
    last = await app.request('GET', '/applications', { headers: { Origin: 'https://any.example' } })
    statuses.push(last.status)
  }
  t.same(statuses, [200, 200, 429])
  t.equal(last!.headers.get('access-control-allow-origin'), 'https://any.example', '`*` answers every origin with its own')
  t.match(last!.headers.get('access-control-expose-headers'), /Retry-After/)
  t.ok(last!.headers.get('retry-after'))
})

t.test("/proxy: Tessera's CORS headers replace the destination's for an allowed origin only", async (t) => {
  const app = await startProxyApp(t, { SVC_CORS_ORIGINS: SHOP })
  const stub = await startStub(t, (_req, res) =>
    res.writeHead(200, { 'Access-Control-Allow-Origin': '*', 'Access-Control-Allow-Credentials': 'true', 'Access-Control-Expose-Headers': 'X-Secret', Vary: 'Accept-Encoding', 'X-Kept': '1' }).end('ok'),
  )
  const allowed = await app.proxy(stub.origin, { headers: ['Origin', SHOP] })
  t.equal(allowed.status, 200)
  t.equal(allowed.headers['access-control-allow-origin'], SHOP)
  t.equal(allowed.headers['access-control-allow-credentials'], undefined, "the destination's credentials flag is not relayed")
  t.match(allowed.headers['access-control-expose-headers'], /SVC-PROXY-DESTINATION-STATUS/)
  t.notMatch(allowed.headers['access-control-expose-headers'], /X-Secret/)
  t.match(allowed.headers.vary, /Accept-Encoding/)
  t.match(allowed.headers.vary, /Origin/)
  t.equal(allowed.headers['x-kept'], '1')
  t.equal(allowed.body.toString(), 'ok')

  const server = await app.proxy(stub.origin)
  t.equal(server.headers['access-control-allow-origin'], '*', 'a call from no page gets the destination\'s headers as they are (API.md)')
  t.equal(server.headers['access-control-allow-credentials'], 'true')
  t.equal(server.headers.vary, 'Accept-Encoding, Origin', 'with CORS on the answer depends on Origin, and says so')

  const other = await app.proxy(stub.origin, { headers: ['Origin', 'https://evil.example'] })
  t.equal(other.headers['access-control-allow-origin'], '*', 'an origin not allowed gets what the destination sent (its page still could not send the key: the preflight is Tessera\'s)')
  t.match(other.headers.vary, /Origin/)
})

t.test("a Reactor's answer cannot set the CORS fields, and adds to Vary", async (t) => {
  const app = await startTestApp(t, { SVC_CORS_ORIGINS: SHOP })
  const caller = await appKey(app, { type: 'private', permissions: ['token:use'] })
  const headers = "{ 'access-control-allow-origin': 'https://evil.example', 'access-control-allow-credentials': 'true', 'access-control-expose-headers': 'X-A', vary: 'Accept-Language', 'x-kept': '1' }"
  const code = `module.exports = async () => { throw new CustomHttpResponseError({ status: 202, headers: ${headers}, body: 'hi' }) }`
  const reactor = await app.request('POST', '/reactors', { body: { name: 'r', code } })
  for (const origin of [SHOP, undefined]) {
    const res = await app.request('POST', `/reactors/${reactor.body.id}/react`, { key: caller, body: { args: {} }, headers: origin ? { Origin: origin } : {} })
    t.equal(res.status, 202)
    t.equal(res.headers.get('access-control-allow-origin'), origin ?? null, String(origin))
    t.equal(res.headers.get('access-control-allow-credentials'), null)
    t.notMatch(res.headers.get('access-control-expose-headers') ?? '', /X-A/)
    t.equal(res.headers.get('vary'), 'Origin, Accept-Language')
    t.equal(res.headers.get('x-kept'), '1')
  }
})
