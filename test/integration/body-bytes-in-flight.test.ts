import net from 'node:net'
import t from 'tap'
import { BodyBudget } from '../../src/http/body-budget.js'
import { startProxyApp } from '../helpers/proxy.js'
import { startStub } from '../helpers/stub-server.js'
import { appKey } from '../helpers/tokens.js'
import { until } from '../helpers/wait.js'

// 200 sockets each holding a 5 MB POST /tokens body open (all but its last byte) took the
// process from 166 MB to 1.2 GB: rate limits count requests at their headers, not bodies in
// flight. The budget here is small so that a few requests of 150 kB show it.
const BUDGET = 300_000
const budget = new BodyBudget(BUDGET)

const app = await startProxyApp(t, {}, { bodyBudget: budget })
const publicKey = await appKey(app, { type: 'public', permissions: ['token:create'] })
const port = Number(new URL(app.url).port)
const inUse = () => budget.bytesInUse

/** A request whose headers go out now, then `bytes` of its body; `answer` is what comes back before the socket closes. */
async function open(path: string, headers: Record<string, string>, bytes: number) {
  const socket = net.connect(port, '127.0.0.1')
  t.teardown(() => socket.destroy())
  await new Promise((resolve) => socket.once('connect', resolve))
  let text = ''
  socket.on('data', (chunk: Buffer) => (text += chunk.toString()))
  socket.on('error', () => {})
  const answer = new Promise<{ status: number; text: string }>((resolve) => socket.once('close', () => resolve({ status: Number(text.split(' ')[1]), text })))
  const head = Object.entries({ 'Content-Type': 'application/json', Connection: 'close', ...headers }).map(([k, v]) => `${k}: ${v}\r\n`).join('')
  socket.write(`POST ${path} HTTP/1.1\r\nHost: x\r\n${head}\r\n`)
  const send = (n: number) => socket.write(headers['Transfer-Encoding'] ? `${n.toString(16)}\r\n${'x'.repeat(n)}\r\n` : 'x'.repeat(n))
  if (bytes > 0) send(bytes)
  return { socket, answer, send }
}

const token = (extra: Record<string, string> = {}) => ({ 'SVC-API-KEY': publicKey, ...extra })

t.test('past the budget: 503 with Retry-After, up front or as chunks arrive; aborted bodies give their bytes back', async (t) => {
  const held = await open('/tokens', token({ 'Content-Length': '200000' }), 150_000)
  await until(() => inUse() === 150_000, 'the held body charged as it arrived')

  const declared = await open('/tokens', token({ 'Content-Length': '200000' }), 0)
  const refused = await declared.answer
  t.equal(refused.status, 503, 'a declared length that does not fit is refused before it is read')
  t.match(refused.text, /retry-after: 1/i)
  t.match(refused.text, '"type":"/problems/unavailable"')

  const chunked = await open('/tokens', token({ 'Transfer-Encoding': 'chunked' }), 100_000)
  await until(() => inUse() === 250_000, 'the chunked body charged as it arrived')
  chunked.send(100_000)
  t.equal((await chunked.answer).status, 503, 'a chunk that passes the budget is refused')
  t.equal(inUse(), 150_000, 'the refused body gave its bytes back')

  const wrongKey = await open('/tokens', { 'SVC-API-KEY': 'key_nope', 'Content-Length': '100000' }, 100_000)
  t.equal((await wrongKey.answer).status, 401)
  t.equal(inUse(), 150_000, 'a body is not read before its key is checked')

  held.socket.destroy()
  await until(() => inUse() === 0, 'the aborted body gave its bytes back')
  const fits = await app.request('POST', '/tokens', { key: publicKey, body: { type: 'token', data: 'y'.repeat(250_000) } })
  t.equal(fits.status, 201)
  t.equal(inUse(), 0)
})

t.test('many aborted bodies all come back', async (t) => {
  const sockets = await Promise.all(Array.from({ length: 20 }, () => open('/tokens', token({ 'Content-Length': '20000' }), 10_000)))
  await until(() => inUse() === 200_000, 'all charged')
  for (const { socket } of sockets) socket.destroy()
  await until(() => inUse() === 0, 'all given back')
  t.equal(inUse(), 0)
})

t.test('/proxy: refused as proxy_error, and a body held while the destination answers stays charged until then', async (t) => {
  let answer: () => void = () => {}
  const stub = await startStub(t, (_req, res) => (answer = () => res.end('ok')))
  const held = await open('/proxy', { 'SVC-API-KEY': app.useKey, 'SVC-PROXY-URL': stub.origin, 'Content-Length': '200000' }, 200_000)
  await until(() => stub.seen.length === 1, 'forwarded')
  t.equal(inUse(), 200_000, 'charged while the destination takes its time')

  const refused = await app.proxy(stub.origin, { method: 'POST', body: 'z'.repeat(150_000) })
  t.equal(refused.status, 503)
  t.match(refused.json, { proxy_error: { type: '/problems/unavailable', status: 503 } })
  t.equal(refused.headers['retry-after'], '1')

  answer()
  t.equal((await held.answer).status, 200)
  await until(() => inUse() === 0, 'given back once answered')
})

t.test('/proxy: a caller that stops reading a large answer does not keep its body charged', async (t) => {
  const big = Buffer.alloc(8 * 1024 * 1024, 'a')
  const stub = await startStub(t, (_req, res) => res.writeHead(200, { 'Content-Length': String(big.length) }).end(big))
  const slow = await open('/proxy', { 'SVC-API-KEY': app.useKey, 'SVC-PROXY-URL': stub.origin, 'Content-Length': '190000' }, 190_000)
  slow.socket.pause()
  await until(() => stub.seen.length === 1, 'forwarded')
  await until(() => inUse() === 0, 'given back once the call was answered, though the answer is still on its way')
  const fits = await app.request('POST', '/tokens', { key: publicKey, body: { type: 'token', data: 'y'.repeat(250_000) } })
  t.equal(fits.status, 201, 'others\' bodies fit again')
  slow.socket.destroy()
})
