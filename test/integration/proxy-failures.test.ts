import t from 'tap'
import { assertProxyError, rawRequest, startProxyApp } from '../helpers/proxy.js'
import { closedPort, startRawStub, startStub } from '../helpers/stub-server.js'
import { appKey } from '../helpers/tokens.js'

t.test('ephemeral proxy: failures are proxy_error without a destination status', async (t) => {
  const app = await startProxyApp(t, { SVC_PROXY_TIMEOUT_MS: '300', SVC_BODY_LIMIT_BYTES: '1024' })
  const stub = await startStub(t)
  const call = (key: string | null, headers: string[] = [], method = 'GET') =>
    rawRequest(app.url, { method, path: '/proxy/x', headers: [...(key === null ? [] : ['SVC-API-KEY', key]), 'SVC-PROXY-URL', stub.origin, ...headers] })

  t.test('authentication and authorization: 401 / 403, nothing forwarded', async (t) => {
    const before = stub.seen.length
    const readOnly = await appKey(app, { name: 'reader', type: 'private', permissions: ['token:read'] })
    const publicKey = await appKey(app, { name: 'pub', type: 'public', permissions: ['token:create'] })
    const viaRule = await appKey(app, {
      name: 'rule',
      type: 'private',
      rules: [{ priority: 1, container: '/pci/', transform: 'reveal', permissions: ['token:use'] }],
    })
    assertProxyError(t, await call(null), 401, 'no key')
    assertProxyError(t, await call('key_doesnotexist0000000000000000000000000000'), 401, 'unknown key')
    assertProxyError(t, await call(app.adminKey), 403, 'management Application')
    assertProxyError(t, await call(readOnly), 403, 'private without token:use')
    assertProxyError(t, await call(publicKey), 403, 'public Application')
    t.equal(stub.seen.length, before, 'no refused call reached the destination')
    const ok = await call(viaRule)
    t.equal(ok.status, 200, 'token:use granted by a rule is enough')
  })

  t.test('SVC-PROXY-URL missing or invalid: 400', async (t) => {
    for (const url of [undefined, '', 'not a url', 'https://', 'https://exa mple.com']) {
      const headers = ['SVC-API-KEY', app.useKey, ...(url === undefined ? [] : ['SVC-PROXY-URL', url])]
      assertProxyError(t, await rawRequest(app.url, { path: '/proxy', headers }), 400, JSON.stringify(url))
    }
  })

  t.test('methods other than the five: 405', async (t) => {
    for (const method of ['HEAD', 'OPTIONS']) {
      const res = await rawRequest(app.url, { method, path: '/proxy', headers: ['SVC-API-KEY', app.useKey, 'SVC-PROXY-URL', stub.origin] })
      t.equal(res.status, 405, method)
      t.notOk(res.headers['svc-proxy-destination-status'])
    }
    const options = await rawRequest(app.url, { method: 'OPTIONS', path: '/proxy', headers: ['SVC-API-KEY', app.useKey, 'SVC-PROXY-URL', stub.origin] })
    t.match(options.json, { proxy_error: { status: 405 } })
  })

  t.test('a repeated SVC-PROXY-URL is refused, not guessed at', async (t) => {
    assertProxyError(t, await call(app.useKey, ['SVC-PROXY-URL', stub.origin]), 400)
  })

  t.test('only /proxy and /proxy/... are the proxy', async (t) => {
    const res = await rawRequest(app.url, { path: '/proxyx', headers: ['SVC-API-KEY', app.useKey] })
    t.equal(res.status, 404)
    t.notOk(res.json?.proxy_error, 'an ordinary problem')
  })

  t.test('body over the limit: 413', async (t) => {
    const res = await rawRequest(app.url, { method: 'POST', path: '/proxy', body: Buffer.alloc(1025), headers: ['SVC-API-KEY', app.useKey, 'SVC-PROXY-URL', stub.origin] })
    assertProxyError(t, res, 413)
  })

  t.test('destination stalls: 504', async (t) => {
    const stall = await startStub(t, () => {})
    const res = await rawRequest(app.url, { path: '/proxy', headers: ['SVC-API-KEY', app.useKey, 'SVC-PROXY-URL', stall.origin] })
    assertProxyError(t, res, 504)
    t.equal(stall.seen.length, 1, 'the call did reach the destination')
  })

  t.test('destination refuses the connection: 502', async (t) => {
    const port = await closedPort()
    const res = await rawRequest(app.url, { path: '/proxy', headers: ['SVC-API-KEY', app.useKey, 'SVC-PROXY-URL', `http://127.0.0.1:${port}`] })
    assertProxyError(t, res, 502)
  })

  t.test('destination resets before its headers: 502', async (t) => {
    const port = await startRawStub(t, (socket) => socket.once('data', () => socket.resetAndDestroy()))
    const res = await rawRequest(app.url, { path: '/proxy', headers: ['SVC-API-KEY', app.useKey, 'SVC-PROXY-URL', `http://127.0.0.1:${port}`] })
    assertProxyError(t, res, 502)
  })

  t.test('destination answers garbage: 502', async (t) => {
    const port = await startRawStub(t, (socket) => socket.once('data', () => socket.end('NOT HTTP AT ALL\r\n\r\n')))
    const res = await rawRequest(app.url, { path: '/proxy', headers: ['SVC-API-KEY', app.useKey, 'SVC-PROXY-URL', `http://127.0.0.1:${port}`] })
    assertProxyError(t, res, 502)
  })

  t.test('a status outside 200-599 is 502 on both senders, never relayed or left unanswered', async (t) => {
    for (const status of ['000', '042', '099', '600', '799']) {
      const port = await startRawStub(t, (socket) => socket.on('data', () => socket.write(`HTTP/1.1 ${status} X\r\nSet-Cookie: a=b\r\nContent-Length: 2\r\n\r\nok`)))
      // SVC-PROXY-CONNECTION sends through node:http, which passes any three digits through.
      for (const extra of [[], ['SVC-PROXY-CONNECTION', 'keep-alive']]) {
        const res = await rawRequest(app.url, { path: '/proxy', headers: ['SVC-API-KEY', app.useKey, 'SVC-PROXY-URL', `http://127.0.0.1:${port}`, ...extra] })
        assertProxyError(t, res, 502, `${status} ${extra[0] ?? 'undici'}`)
        t.notOk(res.headers['set-cookie'], 'none of its headers')
      }
    }
  })

  t.test('destination resets mid-body: the caller sees an aborted response, never a clean short one', async (t) => {
    const framings = {
      'content-length': 'HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 100000\r\n\r\npartial',
      chunked: 'HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n7\r\npartial\r\n',
    }
    for (const [framing, head] of Object.entries(framings)) {
      const port = await startRawStub(t, (socket) =>
        socket.once('data', () => socket.write(head, () => setImmediate(() => socket.resetAndDestroy()))),
      )
      const res = rawRequest(app.url, { path: '/proxy', headers: ['SVC-API-KEY', app.useKey, 'SVC-PROXY-URL', `http://127.0.0.1:${port}`] })
      await t.rejects(res, framing)
    }
  })

  t.test('a small answer (read whole before relaying) cut mid-body: 502 proxy_error, never a clean short one', async (t) => {
    const port = await startRawStub(t, (socket) =>
      socket.once('data', () => socket.write('HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1000\r\n\r\npartial', () => setImmediate(() => socket.resetAndDestroy()))),
    )
    const res = await rawRequest(app.url, { path: '/proxy', headers: ['SVC-API-KEY', app.useKey, 'SVC-PROXY-URL', `http://127.0.0.1:${port}`] })
    assertProxyError(t, res, 502)
  })

  t.test('destination stalls mid-body: the caller sees an aborted response', async (t) => {
    const dest = await startStub(t, (_req, res) => {
      res.writeHead(200, { 'Content-Type': 'text/plain' })
      res.write('some')
    })
    await t.rejects(rawRequest(app.url, { path: '/proxy', headers: ['SVC-API-KEY', app.useKey, 'SVC-PROXY-URL', dest.origin] }))
  })

  t.test('the service stays healthy after all of that', async (t) => {
    t.equal((await call(app.useKey)).status, 200)
  })
})

t.test('destination policy: every refused URL form is 400 and never reaches the listening stub', async (t) => {
  const app = await startProxyApp(t, { SVC_PROXY_ALLOW_HTTP: 'false', SVC_PROXY_ALLOW_PRIVATE: 'false' })
  const stub = await startStub(t)
  const p = stub.port
  const refused = [
    `http://127.0.0.1:${p}`,
    `https://127.0.0.1:${p}`,
    `https://localhost:${p}`,
    `https://127.1:${p}`,
    `https://0x7f000001:${p}`,
    `https://0x7f.1:${p}`,
    `https://2130706433:${p}`,
    `https://017700000001:${p}`,
    `https://[::1]:${p}`,
    `https://[::ffff:127.0.0.1]:${p}`,
    `https://[::ffff:7f00:1]:${p}`,
    `https://0.0.0.0:${p}`,
    `https://0:${p}`,
    `https://10.0.0.1:${p}`,
    `https://192.168.1.1:${p}`,
    `https://172.16.0.1:${p}`,
    `https://169.254.169.254`,
    `https://100.64.0.1:${p}`,
    `https://[fd00::1]:${p}`,
    `https://[fe80::1]:${p}`,
    `https://224.0.0.1:${p}`,
    `https://user:pass@127.0.0.1:${p}`,
    `https://user@example.com`,
    `ftp://127.0.0.1:${p}`,
    `file:///etc/passwd`,
    `//127.0.0.1:${p}`,
    `https:127.0.0.1:${p}`,
    `https:\\\\127.0.0.1:${p}`,
    `https:////127.0.0.1:${p}`,
    `127.0.0.1:${p}`,
  ]
  for (const url of refused) {
    const res = await rawRequest(app.url, { path: '/proxy', headers: ['SVC-API-KEY', app.useKey, 'SVC-PROXY-URL', url] })
    assertProxyError(t, res, 400, url)
  }
  t.equal(stub.connections(), 0, 'not one connection reached the stub')

  // Sub-paths that would climb out of the base path, against a base that would otherwise pass.
  const open = await startProxyApp(t)
  for (const path of ['/proxy/..', '/proxy/../admin', '/proxy/%2e%2e/admin', '/proxy/a/%2E%2e/../admin', '/proxy//evil.example', '/proxy/%2f%2fevil.example', '/proxy/a\\..\\admin']) {
    const res = await rawRequest(open.url, { path, headers: ['SVC-API-KEY', open.useKey, 'SVC-PROXY-URL', `${stub.origin}/api`] })
    assertProxyError(t, res, 400, path)
  }
  t.equal(stub.connections(), 0, 'no traversal reached the stub either')
})

t.test('a name that does not resolve and one that resolves privately get one answer: no DNS oracle', async (t) => {
  const app = await startProxyApp(t, { SVC_PROXY_ALLOW_HTTP: 'false', SVC_PROXY_ALLOW_PRIVATE: 'false' })
  const hosts = ['localhost', 'no-such-host.invalid']
  const answers = []
  for (const host of hosts) {
    const res = await app.proxy(`https://${host}`)
    assertProxyError(t, res, 400, host)
    const { type, status, title, detail } = res.json.proxy_error
    answers.push({ type, status, title, detail: String(detail).replace(host, '<host>') })
  }
  t.same(answers[0], answers[1], '/proxy: the same status, type and detail')
  t.match(answers[0], { type: /destination-refused$/, detail: 'The host <host> cannot be used as a destination.' })

  // Reactor (and transform) fetch goes through the same forwarder.
  const caller = await appKey(app, { type: 'private', permissions: ['token:use'] })
  const code = 'module.exports = async (req) => { try { await fetch(req.args.url); return { raw: "fetched" } } catch (e) { return { raw: String(e.message) } } }'
  const reactor = await app.request('POST', '/reactors', { body: { name: 'dns', code } })
  const fetched = []
  for (const host of hosts) {
    const res = await app.request('POST', `/reactors/${reactor.body.id}/react`, { key: caller, body: { args: { url: `https://${host}/x` } } })
    t.equal(res.status, 200, host)
    fetched.push(String(res.body.raw).replace(host, '<host>'))
  }
  t.equal(fetched[0], fetched[1], 'fetch: the same message')
  t.notMatch(fetched[1], /ENOTFOUND|EAI_|not public/)
})

t.test('tenant setting ephemeral_proxy_enabled', async (t) => {
  const app = await startProxyApp(t)
  const stub = await startStub(t)
  const patch = (enabled: boolean) =>
    app.request('PATCH', '/tenants/self', {
      rawBody: JSON.stringify({ settings: { ephemeral_proxy_enabled: enabled } }),
      headers: { 'content-type': 'application/merge-patch+json' },
    })
  t.equal((await app.proxy(stub.origin)).status, 200, 'enabled by default')
  t.equal((await patch(false)).status, 200)
  assertProxyError(t, await app.proxy(stub.origin), 403, 'disabled')
  assertProxyError(t, await app.proxy(stub.origin, { headers: ['SVC-PROXY-KEY', 'anything'] }), 403, 'SVC-PROXY-KEY is not served yet')
  t.equal((await patch(true)).status, 200)
  t.equal((await app.proxy(stub.origin)).status, 200, 'enabled again at once')
  t.equal(stub.seen.length, 2)
})
