import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { pipeline } from 'node:stream'
import t from 'tap'
import type { Forwarder } from '../../../src/egress/forward.js'
import { closedPort, openForwarder, rawDestination, readAll, startRawStub, startStub } from '../../helpers/stub-server.js'

// Each scenario runs on both outbound paths: undici, and node:http (taken when a header is injected).
const paths: { name: string; headers: Record<string, string> }[] = [
  { name: 'undici', headers: {} },
  { name: 'node:http', headers: { 'svc-proxy-connection': 'keep-alive' } },
]

for (const path of paths) {
  t.test(`${path.name}: a destination that stalls is a 504`, async (t) => {
    const stub = await startStub(t, () => {}) // never answers
    const forwarder = openForwarder(t, { timeoutMs: 300 })
    const err = await forwarder.forward({ method: 'GET', destination: rawDestination(stub.origin), headers: path.headers }).catch((e: unknown) => e)
    t.match(err, { code: 'destination_timeout', status: 504 })
    t.ok((err as Error).cause, 'keeps the cause')
  })

  t.test(`${path.name}: a body that stalls mid-way errors the stream`, async (t) => {
    const stub = await startStub(t, (_req, res) => {
      res.writeHead(200, { 'content-length': '100' })
      res.write('partial') // then nothing more
    })
    const forwarder = openForwarder(t, { timeoutMs: 300 })
    const res = await forwarder.forward({ method: 'GET', destination: rawDestination(stub.origin), headers: path.headers })
    t.equal(res.status, 200)
    await t.rejects(readAll(res.body))
  })

  t.test(`${path.name}: a destination that switches protocols (101) is a 502, never a hang`, async (t) => {
    const port = await startRawStub(t, (socket) =>
      socket.once('data', () => socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\nraw bytes')),
    )
    const forwarder = openForwarder(t, { timeoutMs: 60_000 })
    const err = await forwarder.forward({ method: 'GET', destination: rawDestination(`http://127.0.0.1:${port}/`), headers: path.headers }).catch((e: unknown) => e)
    t.match(err, { code: 'destination_unreachable', status: 502, detail: /switched protocols \(101\); the proxy does not tunnel/ })
  })

  t.test(`${path.name}: a destination that trickles its head is a 504`, async (t) => {
    // Never idle for the time-out, never done: only a deadline on the whole head ends it.
    const port = await startRawStub(t, (socket) => {
      const timer = setInterval(() => socket.write('X'), 50)
      socket.once('data', () => socket.write('HTTP/1.1 200 OK\r\nX-Slow: '))
      socket.on('close', () => clearInterval(timer))
    })
    const forwarder = openForwarder(t, { timeoutMs: 400 })
    const err = await forwarder.forward({ method: 'GET', destination: rawDestination(`http://127.0.0.1:${port}/`), headers: path.headers }).catch((e: unknown) => e)
    t.match(err, { status: 504 })
  })

  t.test(`${path.name}: a refused port is a 502`, async (t) => {
    const forwarder = openForwarder(t)
    const err = await forwarder.forward({
      method: 'POST', destination: rawDestination(`http://127.0.0.1:${await closedPort()}/`), headers: path.headers, body: 'x',
    }).catch((e: unknown) => e)
    t.match(err, { code: 'destination_unreachable', status: 502, detail: /ECONNREFUSED/ })
    t.match((err as Error).cause, { code: 'ECONNREFUSED' })
  })

  t.test(`${path.name}: an unknown host is a 502`, async (t) => {
    const forwarder = openForwarder(t)
    await t.rejects(forwarder.forward({ method: 'GET', destination: rawDestination('http://no-such-host.invalid/'), headers: path.headers }),
      { code: 'destination_unreachable', status: 502 })
  })

  t.test(`${path.name}: a reset before the headers is a 502`, async (t) => {
    const port = await startRawStub(t, (socket) => socket.once('data', () => socket.resetAndDestroy()))
    const forwarder = openForwarder(t)
    await t.rejects(forwarder.forward({ method: 'GET', destination: rawDestination(`http://127.0.0.1:${port}/`), headers: path.headers }),
      { code: 'destination_unreachable', status: 502 })
  })

  t.test(`${path.name}: a close before the headers is a 502`, async (t) => {
    const port = await startRawStub(t, (socket) => socket.once('data', () => socket.end()))
    const forwarder = openForwarder(t)
    await t.rejects(forwarder.forward({ method: 'GET', destination: rawDestination(`http://127.0.0.1:${port}/`), headers: path.headers }),
      { code: 'destination_unreachable', status: 502 })
  })

  for (const framing of ['content-length', 'chunked']) {
    t.test(`${path.name}: a reset mid-body (${framing}) errors the body stream`, async (t) => {
      const head = framing === 'chunked'
        ? 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n'
        : 'HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nhello'
      const port = await startRawStub(t, (socket) => socket.once('data', () => {
        socket.write(head, () => setImmediate(() => socket.resetAndDestroy()))
      }))
      const forwarder = openForwarder(t)
      const res = await forwarder.forward({ method: 'GET', destination: rawDestination(`http://127.0.0.1:${port}/`), headers: path.headers })
      t.equal(res.status, 200)
      await t.rejects(readAll(res.body), 'never a clean end')
    })
  }

  t.test(`${path.name}: piping a body that resets aborts the client response`, async (t) => {
    const port = await startRawStub(t, (socket) => socket.once('data', () => {
      socket.write('HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nhello', () => setImmediate(() => socket.resetAndDestroy()))
    }))
    const forwarder = openForwarder(t)
    const front = await startFront(t, forwarder, `http://127.0.0.1:${port}/`, path.headers)
    const outcome = await new Promise<string>((resolve) => {
      http.get(front, (res) => {
        res.on('data', () => {})
        res.on('end', () => resolve('clean end'))
        res.on('error', () => resolve('aborted'))
      }).on('error', () => resolve('aborted'))
    })
    t.equal(outcome, 'aborted')
  })

  t.test(`${path.name}: a body error before a slow consumer pipes it is kept, and does not crash`, async (t) => {
    const port = await startRawStub(t, (socket) => socket.once('data', () => {
      socket.write('HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nhello', () => setImmediate(() => socket.resetAndDestroy()))
    }))
    const forwarder = openForwarder(t)
    const res = await forwarder.forward({ method: 'GET', destination: rawDestination(`http://127.0.0.1:${port}/`), headers: path.headers })
    // An after-forward plugin still working: nobody reads the body until it has already failed.
    await new Promise((resolve) => res.body.once('close', resolve))
    t.ok(res.body.errored, 'the stream holds the error')
    await t.rejects(readAll(res.body), 'a late consumer still sees it')
  })
}

t.test('an aborted client signal cancels the outbound call', async (t) => {
  const stub = await startStub(t, () => {})
  const forwarder = openForwarder(t)
  const controller = new AbortController()
  const pending = forwarder.forward({ method: 'GET', destination: rawDestination(stub.origin), headers: {}, signal: controller.signal })
  setImmediate(() => controller.abort())
  const err = await pending.catch((e: unknown) => e)
  t.notMatch(err, { status: Number }, 'an abort is not turned into a response status')
})

/** A front server that pipes the forwarded body to its own client, as the /proxy route will. */
async function startFront(t: { teardown(fn: () => unknown): void }, forwarder: Forwarder, href: string, headers: Record<string, string>): Promise<string> {
  const server = http.createServer((_req, res) => {
    forwarder.forward({ method: 'GET', destination: rawDestination(href), headers }).then((answer) => {
      res.writeHead(answer.status, answer.headers)
      pipeline(answer.body, res, () => {})
    }, () => res.destroy())
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => {
    server.closeAllConnections()
    return new Promise((resolve) => server.close(resolve))
  })
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/`
}
