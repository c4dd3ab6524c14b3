import { Readable } from 'node:stream'
import t from 'tap'
import { openForwarder, rawDestination, readAll, startStub } from '../../helpers/stub-server.js'

/** Every [name, value] pair the destination received for `name`, byte for byte. */
function rawPairs(rawHeaders: string[], name: string): [string, string][] {
  const pairs: [string, string][] = []
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (rawHeaders[i]?.toLowerCase() === name) pairs.push([rawHeaders[i] as string, rawHeaders[i + 1] as string])
  }
  return pairs
}

t.test('SVC-PROXY-KEEP-ALIVE and SVC-PROXY-CONNECTION reach the wire as Keep-Alive and Connection', async (t) => {
  const stub = await startStub(t)
  const forwarder = openForwarder(t)
  const res = await forwarder.forward({
    method: 'POST',
    destination: rawDestination(`${stub.origin}/inject?q=1`),
    headers: {
      'svc-proxy-keep-alive': 'timeout=5, max=1000',
      'svc-proxy-connection': 'Keep-Alive',
      connection: 'x-client-hop',
      'x-client-hop': 'dropped',
      'keep-alive': 'timeout=1',
      'x-custom': 'kept',
      'svc-api-key': 'secret',
      'content-type': 'text/plain',
    },
    body: 'hello',
  })
  t.equal(res.status, 200)
  t.equal((await readAll(res.body)).toString(), 'hello')
  const seen = stub.seen[0]
  const raw = seen?.rawHeaders ?? []
  t.same(rawPairs(raw, 'connection'), [['Connection', 'Keep-Alive']], 'exactly the given Connection')
  t.same(rawPairs(raw, 'keep-alive'), [['Keep-Alive', 'timeout=5, max=1000']], 'exactly the given Keep-Alive')
  t.same(rawPairs(raw, 'host'), [['Host', `127.0.0.1:${stub.port}`]])
  t.same(rawPairs(raw, 'content-length'), [['Content-Length', '5']])
  t.equal(seen?.headers['x-custom'], 'kept')
  t.equal(seen?.url, '/inject?q=1')
  for (const name of ['x-client-hop', 'svc-api-key', 'svc-proxy-keep-alive', 'svc-proxy-connection']) {
    t.same(rawPairs(raw, name), [], `${name} not sent`)
  }
})

t.test('only keep-alive and close are sent as Connection; anything else is a 400 before anything is sent', async (t) => {
  const stub = await startStub(t)
  const forwarder = openForwarder(t)
  for (const value of ['close', 'keep-alive', 'Keep-Alive', ' CLOSE ']) {
    await readAll((await forwarder.forward({
      method: 'GET', destination: rawDestination(stub.origin), headers: { 'svc-proxy-connection': value },
    })).body)
    t.same(rawPairs(stub.seen.at(-1)?.rawHeaders ?? [], 'connection'), [['Connection', value.trim()]], value)
  }
  const sent = stub.seen.length
  for (const value of ['Upgrade', 'upgrade, keep-alive', 'Upgrade, X-Thing', 'TE', 'keep-alive, Content-Length', 'keep-alive, Authorization', 'close, close', '']) {
    await t.rejects(forwarder.forward({ method: 'GET', destination: rawDestination(stub.origin), headers: { 'svc-proxy-connection': value } }),
      { code: 'bad_request', status: 400, detail: /SVC-PROXY-CONNECTION must be keep-alive or close/ }, JSON.stringify(value))
  }
  t.equal(stub.seen.length, sent, 'none of them reached the destination')
})

t.test('SVC-PROXY-KEEP-ALIVE takes timeout=<n> and max=<n> only', async (t) => {
  const stub = await startStub(t)
  const forwarder = openForwarder(t)
  for (const value of ['timeout=5', 'max=100', 'timeout=5, max=1000', 'MAX=1,timeout=2']) {
    await readAll((await forwarder.forward({ method: 'GET', destination: rawDestination(stub.origin), headers: { 'svc-proxy-keep-alive': value } })).body)
    t.same(rawPairs(stub.seen.at(-1)?.rawHeaders ?? [], 'keep-alive'), [['Keep-Alive', value]], value)
  }
  const sent = stub.seen.length
  for (const value of ['timeout', 'timeout=x', 'timeout=5, timeout=6', 'timeout=5; max=1', 'timeout=5, Content-Length', 'foo=1', '', 'timeout=-1']) {
    await t.rejects(forwarder.forward({ method: 'GET', destination: rawDestination(stub.origin), headers: { 'svc-proxy-keep-alive': value } }),
      { code: 'bad_request', status: 400, detail: /SVC-PROXY-KEEP-ALIVE/ }, JSON.stringify(value))
  }
  t.equal(stub.seen.length, sent, 'none of them reached the destination')
})

t.test('Keep-Alive alone implies Connection: keep-alive', async (t) => {
  const stub = await startStub(t)
  const forwarder = openForwarder(t)
  await readAll((await forwarder.forward({
    method: 'GET', destination: rawDestination(stub.origin), headers: { 'svc-proxy-keep-alive': 'timeout=30' },
  })).body)
  const raw = stub.seen[0]?.rawHeaders ?? []
  t.same(rawPairs(raw, 'connection'), [['Connection', 'keep-alive']])
  t.same(rawPairs(raw, 'keep-alive'), [['Keep-Alive', 'timeout=30']])
  t.same(rawPairs(raw, 'content-length'), [], 'no framing header for a GET without a body')
})

t.test('the injected path streams bodies and passes statuses through', async (t) => {
  const stub = await startStub(t, (req, res, body) => {
    res.writeHead(req.url === '/redirect' ? 307 : 201, { location: '/x', 'x-len': String(body.length) }).end(body)
  })
  const forwarder = openForwarder(t)
  const headers = { 'svc-proxy-connection': 'keep-alive' }
  const streamed = await forwarder.forward({
    method: 'PUT', destination: rawDestination(`${stub.origin}/s`), headers, body: Readable.from([Buffer.from([0, 1]), Buffer.from([255])]),
  })
  t.equal(streamed.status, 201)
  t.ok((await readAll(streamed.body)).equals(Buffer.from([0, 1, 255])))
  t.same(rawPairs(stub.seen[0]?.rawHeaders ?? [], 'transfer-encoding'), [['Transfer-Encoding', 'chunked']])
  const redirect = await forwarder.forward({ method: 'POST', destination: rawDestination(`${stub.origin}/redirect`), headers })
  t.equal(redirect.status, 307, 'not followed')
  t.equal(redirect.headers.location, '/x')
  t.equal(redirect.headers.connection, undefined, 'hop-by-hop stripped from the response')
  await readAll(redirect.body)
  t.same(rawPairs(stub.seen[1]?.rawHeaders ?? [], 'content-length'), [['Content-Length', '0']])
})

t.test('a header value with CR/LF is refused before anything is sent', async (t) => {
  const stub = await startStub(t)
  const forwarder = openForwarder(t)
  await t.rejects(forwarder.forward({
    method: 'GET', destination: rawDestination(stub.origin), headers: { 'svc-proxy-keep-alive': 'a\r\nX-Evil: 1' },
  }), { code: 'bad_request', status: 400 })
  await t.rejects(forwarder.forward({
    method: 'GET', destination: rawDestination(stub.origin), headers: { 'x-detokenized': 'a\r\nX-Evil: 1' },
  }), { code: 'bad_request', status: 400 })
  t.equal(stub.seen.length, 0)
})
