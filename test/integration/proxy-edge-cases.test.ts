import type { Socket } from 'node:net'
import t from 'tap'
import { assertProxyError, rawRequest, startProxyApp } from '../helpers/proxy.js'
import { startRawStub, startStub } from '../helpers/stub-server.js'

const SWITCH = 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n'

t.test('upgrades are refused: the proxy does not tunnel', async (t) => {
  const app = await startProxyApp(t)
  let requests = 0
  const port = await startRawStub(t, (socket) => socket.once('data', () => (requests++, socket.write(SWITCH))))
  const target = `http://127.0.0.1:${port}`

  const asked = await app.proxy(target, { headers: ['SVC-PROXY-CONNECTION', 'Upgrade', 'Upgrade', 'websocket'] })
  assertProxyError(t, asked, 400, 'SVC-PROXY-CONNECTION: Upgrade')
  t.match(asked.json.proxy_error.detail, /does not tunnel/)
  t.equal(requests, 0, 'nothing was sent')

  // A destination that switches unasked, on either outbound path: a 502, not a caller left waiting.
  for (const headers of [[], ['SVC-PROXY-CONNECTION', 'keep-alive']]) {
    const res = await app.proxy(target, { headers })
    assertProxyError(t, res, 502, `unasked 101 ${JSON.stringify(headers)}`)
    t.match(res.json.proxy_error.detail, /does not tunnel/)
  }
  // The caller's own Upgrade/Connection headers are hop-by-hop: never forwarded.
  const stub = await startStub(t)
  const own = await app.proxy(stub.origin, { headers: ['Connection', 'Upgrade', 'Upgrade', 'websocket'] })
  t.equal(own.status, 200)
  t.notOk(stub.seen.at(-1)?.headers.upgrade, 'Upgrade not forwarded')
})

t.test('SVC-PROXY-CONNECTION and SVC-PROXY-KEEP-ALIVE take only the documented values', async (t) => {
  const app = await startProxyApp(t)
  const stub = await startStub(t)
  for (const [name, value] of [
    ['SVC-PROXY-CONNECTION', 'keep-alive, Content-Length'],
    ['SVC-PROXY-CONNECTION', 'keep-alive, Authorization'],
    ['SVC-PROXY-CONNECTION', 'TE'],
    ['SVC-PROXY-KEEP-ALIVE', 'timeout=5, Content-Length'],
    ['SVC-PROXY-KEEP-ALIVE', 'bogus'],
  ] as const) {
    assertProxyError(t, await app.proxy(stub.origin, { headers: [name, value] }), 400, `${name}: ${value}`)
  }
  t.equal(stub.seen.length, 0, 'nothing was forwarded')
  const ok = await app.proxy(stub.origin, { headers: ['SVC-PROXY-CONNECTION', 'close', 'SVC-PROXY-KEEP-ALIVE', 'timeout=5, max=10'] })
  t.equal(ok.status, 200)
  t.equal(stub.seen.at(-1)?.headers.connection, 'close')
})

t.test('dot segments with path parameters are refused like other traversal', async (t) => {
  const app = await startProxyApp(t)
  const stub = await startStub(t)
  const forms = ['/proxy/..;/admin', '/proxy/api/..;/..;/admin', '/proxy/%2e%2e;/admin', '/proxy/..%3b/admin', '/proxy/%2E%2E%3Bx=1/admin', '/proxy/.;/admin']
  // Double encoding, NUL, overlong UTF-8 and look-alikes: servers that decode again or fold them resolve `..` too.
  const encoded = ['/proxy/%252e%252e;/admin', '/proxy/%252e%252e/admin', '/proxy/..%00/admin', '/proxy/%c0%ae%c0%ae/admin', '/proxy/%u002e%u002e/admin', '/proxy/..%20/admin']
  for (const path of [...forms, ...encoded]) {
    assertProxyError(t, await app.proxy(`${stub.origin}/base`, { path }), 400, path)
  }
  assertProxyError(t, await app.proxy(`${stub.origin}/base/..;/admin`), 400, 'in SVC-PROXY-URL')
  t.equal(stub.seen.length, 0, 'nothing was forwarded')
  const params = await app.proxy(`${stub.origin}/base`, { path: '/proxy/a;v=1/b' })
  t.equal(params.status, 200, 'ordinary path parameters still pass')
  t.equal(stub.seen.at(-1)?.url, '/base/a;v=1/b')
})

t.test('look-alikes that Unicode normalization folds into dots or separators, and controls in a dot segment, are refused', async (t) => {
  const app = await startProxyApp(t)
  const stub = await startStub(t)
  const forms = ['/proxy/v1/%e2%80%a5/admin', '/proxy/v1/%E2%80%A4%E2%80%A4/admin', '/proxy/v1/%ef%b9%92%ef%b9%92/admin',
    '/proxy/v1%ef%bc%bc..%ef%bc%bcadmin', '/proxy/v1%ef%b9%a8..%ef%b9%a8admin', '/proxy/v1/..%09/admin', '/proxy/v1/.%0a./admin']
  for (const path of forms) {
    assertProxyError(t, await app.proxy(`${stub.origin}/base`, { path }), 400, path)
  }
  // A pre-configured proxy forwards its sub-path under its own destination the same way.
  const owner = await app.request('POST', '/applications', { body: { name: 'owner', type: 'private', permissions: ['token:use'] } })
  const proxy = await app.request('POST', '/proxies', {
    body: { name: 'fold', destination_url: `${stub.origin}/base`, require_auth: false, application: { id: owner.body.id } },
  })
  t.equal(proxy.status, 201)
  for (const path of forms) {
    assertProxyError(t, await rawRequest(app.url, { path, headers: ['SVC-PROXY-KEY', proxy.body.key] }), 400, `pre-configured ${path}`)
  }
  t.equal(stub.seen.length, 0, 'nothing was forwarded')
  const ok = await rawRequest(app.url, { path: '/proxy/v1/caf%C3%A9/%e2%80%a5x', headers: ['SVC-PROXY-KEY', proxy.body.key] })
  t.equal(ok.status, 200, 'other non-ASCII paths still pass')
  t.equal(stub.seen.at(-1)?.url, '/base/v1/caf%C3%A9/%e2%80%a5x', 'forwarded as sent')
})

t.test('every forwarded call ends within the destination time-out, however slowly the destination trickles', async (t) => {
  const TIMEOUT_MS = 1000
  // Room for scheduling on a loaded machine; what is asserted is "bounded", not "fast".
  const BOUND_MS = TIMEOUT_MS + 1500
  const app = await startProxyApp(t, { SVC_PROXY_TIMEOUT_MS: String(TIMEOUT_MS) })
  const timers = new Set<NodeJS.Timeout>()
  t.teardown(() => timers.forEach(clearInterval))
  // One byte every 200 ms: always within the idle time-out, never done.
  const drip = (socket: Socket, head: string, unit: string) => {
    socket.write(head)
    const timer = setInterval(() => (socket.destroyed ? clearInterval(timer) : socket.write(unit)), 200)
    timers.add(timer)
  }
  const bodyDrip = await startRawStub(t, (socket) => socket.once('data', () => drip(socket, 'HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n', '1\r\nx\r\n')))
  const headDrip = await startRawStub(t, (socket) => socket.once('data', () => drip(socket, 'HTTP/1.1 200 OK\r\n', 'X')))
  // A small announced body is read whole before it is relayed: still arriving at the deadline, a 504.
  const smallDrip = await startRawStub(t, (socket) => socket.once('data', () => drip(socket, 'HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1000\r\n\r\n', 'x')))
  const timed = async <T>(p: Promise<T>) => {
    const start = Date.now()
    const settled = await p.then((value) => ({ value }), (error: unknown) => ({ error }))
    return { ...settled, ms: Date.now() - start }
  }

  for (const headers of [[], ['SVC-PROXY-CONNECTION', 'keep-alive']]) {
    const label = headers.length ? 'node:http path' : 'undici path'
    const body = await timed(app.proxy(`http://127.0.0.1:${bodyDrip}`, { headers }))
    t.ok('error' in body, `${label}, body trickle: the caller sees an aborted response`)
    t.ok(body.ms < BOUND_MS, `${label}, body trickle: ended in ${body.ms} ms`)
    const head = await timed(app.proxy(`http://127.0.0.1:${headDrip}`, { headers }))
    t.ok(head.ms < BOUND_MS, `${label}, head trickle: ended in ${head.ms} ms`)
    if ('value' in head) assertProxyError(t, head.value, 504, `${label}, head trickle`)
    const small = await timed(app.proxy(`http://127.0.0.1:${smallDrip}`, { headers }))
    t.ok(small.ms < BOUND_MS, `${label}, small body trickle: ended in ${small.ms} ms`)
    if ('value' in small) assertProxyError(t, small.value, 504, `${label}, small body trickle`)
    else t.fail(`${label}, small body trickle: answered (${String(small.error)})`)
  }

  // A response transform reads the whole body first: the time-out is a 504, not a wait.
  const reactorApp = await app.request('POST', '/applications', { body: { name: 'transform', type: 'private', permissions: ['token:use'] } })
  const proxy = await app.request('POST', '/proxies', {
    body: { name: 'p', destination_url: `http://127.0.0.1:${bodyDrip}`, require_auth: false, application: { id: reactorApp.body.id }, response_transform: { code: 'module.exports = async (req) => req.args' } },
  })
  t.equal(proxy.status, 201)
  const transformed = await timed(rawRequest(app.url, { path: '/proxy', headers: ['SVC-PROXY-KEY', proxy.body.key] }))
  t.ok(transformed.ms < BOUND_MS, `transform path: ended in ${transformed.ms} ms`)
  t.ok('value' in transformed && transformed.value.status === 504, 'transform path: 504')
})
