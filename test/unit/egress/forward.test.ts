import { randomBytes } from 'node:crypto'
import { Readable } from 'node:stream'
import t from 'tap'
import { buildDestination } from '../../../src/egress/destination-url.js'
import { openForwarder, rawDestination, readAll, startStub } from '../../helpers/stub-server.js'

const relaxed = { allowHttp: true, allowPrivate: true }

t.test('forwards method, path, query and body for every method', async (t) => {
  const stub = await startStub(t)
  const forwarder = openForwarder(t)
  for (const method of ['GET', 'POST', 'PUT', 'PATCH', 'DELETE']) {
    const body = method === 'GET' ? null : `{"m":"${method}"}`
    const destination = buildDestination(`${stub.origin}/base/`, `/items/${method}`, 'a=1&b=two', relaxed)
    const res = await forwarder.forward({ method, destination, headers: { 'content-type': 'application/json' }, body })
    t.equal(res.status, 200, method)
    t.equal(res.headers['x-method'], method)
    t.equal((await readAll(res.body)).toString(), body ?? '')
    const seen = stub.seen.at(-1)
    t.equal(seen?.method, method)
    t.equal(seen?.url, `/base/items/${method}?a=1&b=two`)
    t.equal(seen?.headers['content-length'], body === null ? undefined : String(Buffer.byteLength(body)))
  }
})

t.test('consecutive calls reuse pooled keep-alive connections', async (t) => {
  const stub = await startStub(t)
  const forwarder = openForwarder(t)
  const call = async (method: string, body: string | null): Promise<void> => {
    await readAll((await forwarder.forward({ method, destination: rawDestination(stub.origin), headers: {}, body })).body)
  }
  // undici's pool may open a second connection while the first is still settling; after that, none.
  await call('GET', null)
  await call('POST', 'x')
  const warm = stub.connections()
  for (let i = 0; i < 10; i++) {
    for (const method of ['GET', 'POST', 'PUT', 'PATCH', 'DELETE']) await call(method, /GET|DELETE/.test(method) ? null : 'x')
  }
  t.equal(stub.connections(), warm, `50 calls, no new connection (${warm} pooled)`)
})

t.test('a binary body goes both ways byte-exact', async (t) => {
  const stub = await startStub(t)
  const forwarder = openForwarder(t)
  const bytes = Buffer.concat([Buffer.from(Array.from({ length: 256 }, (_, i) => i)), randomBytes(200_000)])
  const res = await forwarder.forward({
    method: 'POST', destination: rawDestination(`${stub.origin}/bin`),
    headers: { 'content-type': 'application/octet-stream' }, body: bytes,
  })
  t.ok(stub.seen[0]?.body.equals(bytes), 'destination received the exact bytes')
  t.ok((await readAll(res.body)).equals(bytes), 'caller received the exact bytes')
})

t.test('a stream body is sent chunked, or with the Content-Length given', async (t) => {
  const stub = await startStub(t)
  const forwarder = openForwarder(t)
  const parts = [Buffer.from('abc'), Buffer.from('defg')]
  await readAll((await forwarder.forward({ method: 'POST', destination: rawDestination(stub.origin), headers: {}, body: Readable.from(parts) })).body)
  t.equal(stub.seen[0]?.headers['transfer-encoding'], 'chunked')
  t.equal(stub.seen[0]?.body.toString(), 'abcdefg')
  await readAll((await forwarder.forward({
    method: 'PUT', destination: rawDestination(stub.origin), headers: {}, body: Readable.from(parts), contentLength: 7,
  })).body)
  t.equal(stub.seen[1]?.headers['content-length'], '7')
  t.equal(stub.seen[1]?.headers['transfer-encoding'], undefined)
})

t.test('strips SVC-*, Host, Content-Length, hop-by-hop and Connection-named headers', async (t) => {
  const stub = await startStub(t)
  const forwarder = openForwarder(t)
  const headers = {
    host: 'tessera.example', 'content-length': '999', 'svc-api-key': 'secret', 'svc-proxy-url': 'x', 'svc-anything': 'y',
    connection: 'keep-alive, X-Hop-One, x-hop-two', 'x-hop-one': '1', 'x-hop-two': '2', 'keep-alive': 'timeout=5',
    te: 'trailers', trailer: 'x-t', upgrade: 'websocket', 'proxy-authorization': 'Basic eA==', 'proxy-connection': 'keep-alive',
    'proxy-authenticate': 'Basic', 'transfer-encoding': 'chunked', expect: '100-continue',
    authorization: 'Bearer dest-token', 'x-custom': 'kept', cookie: ['a=1', 'b=2'], 'content-type': 'text/plain',
  }
  const res = await forwarder.forward({ method: 'POST', destination: rawDestination(`${stub.origin}/h`), headers, body: 'hello' })
  await readAll(res.body)
  const seen = stub.seen[0]?.headers ?? {}
  t.equal(seen.authorization, 'Bearer dest-token')
  t.equal(seen['x-custom'], 'kept')
  t.equal(seen.cookie, 'a=1; b=2', 'repeated values are all sent')
  t.equal(seen.host, `127.0.0.1:${stub.port}`, 'Host is the destination')
  t.equal(seen['content-length'], '5', 'Content-Length is recomputed')
  for (const name of ['svc-api-key', 'svc-proxy-url', 'svc-anything', 'x-hop-one', 'x-hop-two', 'keep-alive', 'te', 'trailer',
    'upgrade', 'proxy-authorization', 'proxy-connection', 'proxy-authenticate', 'transfer-encoding', 'expect']) {
    t.equal(seen[name], undefined, `${name} is not forwarded`)
  }
})

t.test('raw header arrays are accepted and keep their case', async (t) => {
  const stub = await startStub(t)
  const forwarder = openForwarder(t)
  const raw = ['Host', 'x', 'X-Mixed-Case', 'v', 'SVC-API-KEY', 'k', 'Connection', 'X-Gone', 'X-Gone', 'g', 'Accept', 'a/b', 'Accept', 'c/d']
  await readAll((await forwarder.forward({ method: 'GET', destination: rawDestination(stub.origin), headers: raw })).body)
  const rawSeen = stub.seen[0]?.rawHeaders ?? []
  t.ok(rawSeen.includes('X-Mixed-Case'), 'name case preserved')
  t.equal(stub.seen[0]?.headers.accept, 'a/b, c/d')
  t.notOk(rawSeen.some((h) => /^(svc-api-key|x-gone)$/i.test(h)))
})

t.test('a 3xx is returned as it came, not followed', async (t) => {
  const stub = await startStub(t, (_req, res) => {
    res.writeHead(302, { location: '/elsewhere', 'x-r': '1' }).end('moved')
  })
  const forwarder = openForwarder(t)
  const res = await forwarder.forward({ method: 'GET', destination: rawDestination(`${stub.origin}/start`), headers: {} })
  t.equal(res.status, 302)
  t.equal(res.headers.location, '/elsewhere')
  t.equal((await readAll(res.body)).toString(), 'moved')
  t.equal(stub.seen.length, 1, 'the redirect target was never requested')
})

t.test('4xx and 5xx pass through with headers and body', async (t) => {
  const stub = await startStub(t, (req, res) => {
    const status = Number(req.url?.slice(1))
    res.writeHead(status, { 'content-type': 'application/json', 'set-cookie': ['a=1', 'b=2'] }).end(`{"status":${status}}`)
  })
  const forwarder = openForwarder(t)
  for (const status of [400, 404, 422, 500, 503]) {
    const res = await forwarder.forward({ method: 'GET', destination: rawDestination(`${stub.origin}/${status}`), headers: {} })
    t.equal(res.status, status)
    t.same(res.headers['set-cookie'], ['a=1', 'b=2'])
    t.equal((await readAll(res.body)).toString(), `{"status":${status}}`)
  }
})

t.test('response hop-by-hop and Connection-named headers are stripped', async (t) => {
  const stub = await startStub(t, (_req, res) => {
    res.setHeader('Connection', 'keep-alive, X-Private-Hop')
    res.setHeader('Keep-Alive', 'timeout=5')
    res.setHeader('X-Private-Hop', 'secret')
    res.setHeader('Trailer', 'x-t')
    res.setHeader('X-Kept', 'yes')
    res.end('ok')
  })
  const forwarder = openForwarder(t)
  const res = await forwarder.forward({ method: 'GET', destination: rawDestination(stub.origin), headers: {} })
  await readAll(res.body)
  t.equal(res.headers['x-kept'], 'yes')
  for (const name of ['connection', 'keep-alive', 'x-private-hop', 'trailer', 'transfer-encoding']) {
    t.equal(res.headers[name], undefined, `${name} stripped`)
  }
})
