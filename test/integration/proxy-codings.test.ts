import net from 'node:net'
import { gzipSync } from 'node:zlib'
import t from 'tap'
import { startTestApp, type TestApp } from '../helpers/app.js'
import { rawRequest, startProxyApp, type RawRequest } from '../helpers/proxy.js'
import { startStub } from '../helpers/stub-server.js'
import { appKey, createToken } from '../helpers/tokens.js'

// The proxy's wire: content codings on both legs, markup and header substitution, bodiless
// statuses, a destination answer over the transform limit, and whose RateLimit-* the caller sees.

const VISA = '4242424242424242'

/** A JSON body whose gzip bytes happen to hold `{{` (about 4 % of 4 KB bodies do). */
function gzipWithBraces(): Buffer {
  for (let i = 0; ; i++) {
    const json = JSON.stringify({ order: i, items: Array.from({ length: 20 }, (_, k) => ({ sku: `sku-${i}-${k}`, qty: (i * 7 + k) % 13 })) })
    const zipped = gzipSync(json)
    if (zipped.includes('{{')) return zipped
  }
}

/** Raw bytes to the server (Transfer-Encoding a client library would not send), the answer's status. */
function rawStatus(url: string, head: string[], body: Buffer): Promise<number> {
  const { hostname, port, host } = new URL(url)
  const request = Buffer.concat([Buffer.from(`POST ${head[0]} HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n${head.slice(1).map((h) => `${h}\r\n`).join('')}\r\n`, 'latin1'), body])
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname)
    const chunks: Buffer[] = []
    socket.on('data', (chunk: Buffer) => chunks.push(chunk))
    socket.on('close', () => resolve(Number(Buffer.concat(chunks).toString('latin1').slice(9, 12))))
    socket.on('error', reject)
    // Not end(): a half-closed socket may be closed by the server before it answers.
    socket.write(request)
  })
}

async function createProxy(app: TestApp, body: object): Promise<string> {
  const res = await app.request('POST', '/proxies', { body })
  if (res.status !== 201) throw new Error(`creating a proxy failed: ${res.status} ${res.text}`)
  return res.body.key as string
}

t.test('the ephemeral proxy and the API routes', async (t) => {
  const app = await startProxyApp(t)
  const stub = await startStub(t)
  const writer = await appKey(app, { name: 'writer', type: 'private', permissions: ['token:create'] })
  const markup = await createToken(app, writer, { type: 'token', data: `x</name><admin>"true"</admin>&'` })
  const accented = await createToken(app, writer, { type: 'token', data: 'José €' })
  const send = (req: RawRequest, target = stub.origin) =>
    rawRequest(app.url, { method: 'POST', path: '/proxy', ...req, headers: ['SVC-API-KEY', app.useKey, 'SVC-PROXY-URL', target, ...(req.headers ?? [])] })

  t.test('a compressed body is forwarded byte for byte, even where its bytes spell {{', async (t) => {
    const zipped = gzipWithBraces()
    for (const type of ['application/json', 'text/plain']) {
      const res = await send({ body: zipped, headers: ['Content-Type', type, 'Content-Encoding', 'gzip'] })
      t.equal(res.status, 200, type)
      t.same(stub.seen.at(-1)!.body, zipped, `${type}: the same bytes`)
      t.equal(stub.seen.at(-1)!.headers['content-encoding'], 'gzip')
    }
  })

  t.test('a transfer coding other than chunked is 415, on the proxy and the API', async (t) => {
    const zipped = gzipSync(JSON.stringify({ type: 'token', data: 'hello' }))
    const chunked = Buffer.concat([Buffer.from(`${zipped.length.toString(16)}\r\n`), zipped, Buffer.from('\r\n0\r\n\r\n')])
    const before = stub.seen.length
    t.equal(await rawStatus(app.url, ['/proxy', `SVC-API-KEY: ${app.useKey}`, `SVC-PROXY-URL: ${stub.origin}`, 'Content-Type: application/octet-stream', 'Transfer-Encoding: gzip, chunked'], chunked), 415)
    t.equal(stub.seen.length, before, 'nothing forwarded')
    t.equal(await rawStatus(app.url, ['/tokens', `SVC-API-KEY: ${writer}`, 'Content-Type: application/json', 'Transfer-Encoding: gzip, chunked'], chunked), 415)
  })

  t.test('a JSON route refuses a Content-Encoding instead of parsing the coded bytes', async (t) => {
    const json = JSON.stringify({ type: 'token', data: 'hello' })
    for (const [coding, body] of [['gzip', gzipSync(json)], ['x-unknown', Buffer.from(json)]] as const) {
      const res = await app.request('POST', '/tokens', { key: writer, rawBody: body, headers: { 'content-type': 'application/json', 'content-encoding': coding } })
      t.equal(res.status, 415, coding)
      t.equal(res.body.type, '/problems/unsupported-media-type')
    }
    const plain = await app.request('POST', '/tokens', { key: writer, rawBody: Buffer.from(json), headers: { 'content-type': 'application/json', 'content-encoding': 'identity' } })
    t.equal(plain.status, 201, 'identity is no coding')
  })

  t.test('a value substituted into XML or HTML is escaped; plain text is not', async (t) => {
    for (const type of ['application/xml', 'text/xml', 'application/soap+xml', 'text/html; charset=utf-8']) {
      const res = await send({ body: `<req><name a="{{ ${markup} }}">{{ ${markup} }}</name></req>`, headers: ['Content-Type', type] })
      t.equal(res.status, 200, type)
      const escaped = 'x&lt;/name&gt;&lt;admin&gt;&quot;true&quot;&lt;/admin&gt;&amp;&#39;'
      t.equal(stub.seen.at(-1)!.body.toString(), `<req><name a="${escaped}">${escaped}</name></req>`, type)
    }
    await send({ body: `name={{ ${markup} }}`, headers: ['Content-Type', 'text/plain'] })
    t.equal(stub.seen.at(-1)!.body.toString(), `name=x</name><admin>"true"</admin>&'`)
  })

  t.test('non-ASCII data in a header goes out as its UTF-8 bytes', async (t) => {
    const res = await send({ body: 'x', headers: ['Content-Type', 'text/plain', 'X-Name', `Name {{ ${accented} }}`] })
    t.equal(res.status, 200, 'a character beyond Latin-1 is no 400')
    const seen = stub.seen.at(-1)!
    const bytes = (name: string) => Buffer.from(seen.rawHeaders[seen.rawHeaders.indexOf(name) + 1]!, 'latin1')
    t.same(bytes('X-Name'), Buffer.from('Name José €', 'utf8'))
  })

  t.test('204 and 304 are relayed without a body, whatever the destination framed', async (t) => {
    const notModified = await startStub(t, (_req, res) => {
      res.writeHead(304, { ETag: '"v1"', 'Content-Length': '100000' })
      res.end()
    })
    for (const via of [[], ['SVC-PROXY-CONNECTION', 'keep-alive']]) {
      const res = await send({ method: 'GET', headers: ['If-None-Match', '"v1"', ...via] }, notModified.origin)
      t.equal(res.status, 304, `304 ${via.length ? 'node:http' : 'undici'}`)
      t.equal(res.headers.etag, '"v1"')
      t.equal(res.headers['content-length'], '100000', 'the representation\'s length, as sent (RFC 9110 8.6)')
    }
    const noContent = await startStub(t, (_req, res) => {
      res.writeHead(204, { 'X-Done': 'yes' })
      res.end()
    })
    const res = await send({ method: 'DELETE' }, noContent.origin)
    t.equal(res.status, 204)
    t.equal(res.headers['x-done'], 'yes')
    t.equal(res.body.length, 0)
  })

  t.test('Tessera\'s RateLimit-* fields go out as one set, never mixed with the destination\'s', async (t) => {
    const limited = await startStub(t, (_req, res) => {
      res.writeHead(200, { 'RateLimit-Remaining': '0', 'RateLimit-Policy': '10;w=1', 'Content-Type': 'text/plain' })
      res.end('ok')
    })
    const res = await send({}, limited.origin)
    t.equal(res.status, 200)
    t.ok(res.headers['ratelimit-limit'], 'Tessera\'s limit')
    t.not(res.headers['ratelimit-remaining'], '0', 'Tessera\'s remaining, not the destination\'s')
    t.equal(res.headers['ratelimit-policy'], undefined)
  })
})

t.test('pre-configured proxies: transforms read bodies uncoded', async (t) => {
  const app = await startTestApp(t, { SVC_REACTOR_TIMEOUT_MS: '5000', SVC_REACTOR_PAYLOAD_MAX_BYTES: '65536' })
  const actor = await app.request('POST', '/applications', {
    body: { name: 'proxy actor', type: 'private', rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:use', 'token:create'] }] },
  })
  const application = { id: actor.body.id as string }
  const card = JSON.stringify({ number: VISA, status: 'issued' })
  // A server behind a compression middleware: gzip whenever the client accepts it.
  const polite = await startStub(t, (req, res) => {
    res.setHeader('content-type', 'application/json')
    if (/gzip/.test(String(req.headers['accept-encoding'] ?? ''))) {
      res.setHeader('content-encoding', 'gzip')
      res.end(gzipSync(card))
    } else res.end(card)
  })
  const stubborn = await startStub(t, (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' })
    res.end(gzipSync(card))
  })
  const huge = await startStub(t, (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' })
    res.end('x'.repeat(70_000))
  })
  const tokenizing = 'module.exports = async function (req) { const { args } = req; if (typeof args.body !== "object" || args.body === null) return {}; const t = await req.svc.tokenize({ type: "card_number", data: args.body.number }); return { body: { ...args.body, number: t.id } } }'
  const proxyKey = (destination: string, transform: 'request_transform' | 'response_transform', code: string) =>
    createProxy(app, { name: `${transform} to ${destination}`, destination_url: destination, application, require_auth: false, [transform]: { code } })
  const call = (key: string, req: RawRequest = {}) => rawRequest(app.url, { method: 'POST', path: '/proxy/cards', body: '{}', ...req, headers: ['SVC-PROXY-KEY', key, 'Content-Type', 'application/json', ...(req.headers ?? [])] })

  t.test('the destination is asked for an uncompressed answer, whatever the caller accepts', async (t) => {
    const res = await call(await proxyKey(polite.origin, 'response_transform', tokenizing), { headers: ['Accept-Encoding', 'gzip, deflate'] })
    t.equal(res.status, 200)
    t.equal(res.headers['content-encoding'], undefined)
    t.equal(polite.seen.at(-1)!.headers['accept-encoding'], 'identity')
    const body = JSON.parse(res.body.toString()) as { number: string }
    t.not(body.number, VISA, 'the transform saw the card number and tokenized it')
  })

  t.test('an answer compressed anyway is a 502, never handed to the transform or the caller', async (t) => {
    const res = await call(await proxyKey(stubborn.origin, 'response_transform', tokenizing), { headers: ['Accept-Encoding', 'gzip'] })
    t.equal(res.status, 502)
    t.equal(res.headers['svc-proxy-destination-status'], '200')
    t.notMatch(res.body.toString(), VISA)
    t.notOk(res.body.includes(gzipSync(card).subarray(10, 30)), 'no compressed bytes relayed')
  })

  t.test('an answer over the transform limit is the destination\'s fault: 502, not 413', async (t) => {
    const res = await call(await proxyKey(huge.origin, 'response_transform', 'module.exports = async (req) => ({ body: req.args.body })'))
    t.equal(res.status, 502)
    t.match(JSON.parse(res.body.toString()), { proxy_error: { status: 502, detail: /larger than the 65536-byte transform limit/ } })
  })

  t.test('a request transform refuses a compressed body (415), forwarding nothing', async (t) => {
    const before = polite.seen.length
    const res = await call(await proxyKey(polite.origin, 'request_transform', 'module.exports = async (req) => ({ body: req.args.body })'), {
      body: gzipSync('{"a":1}'),
      headers: ['Content-Encoding', 'gzip'],
    })
    t.equal(res.status, 415)
    t.equal(polite.seen.length, before)
  })
})
