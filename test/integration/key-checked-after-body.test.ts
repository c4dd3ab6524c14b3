import net from 'node:net'
import t from 'tap'
import { startProxyApp } from '../helpers/proxy.js'
import { startStub } from '../helpers/stub-server.js'
import { appKey } from '../helpers/tokens.js'

// A key was checked when the headers arrived, and a body may follow up to the request time-out
// (120 s) later: a holder expecting revocation opened requests, trickled a few bytes, and after
// the revocation's 200 chose which tokens to detokenize.
const app = await startProxyApp(t)
const stub = await startStub(t)
const writer = await appKey(app, { type: 'private', rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:create', 'token:use'] }] })
const secret = (await app.request('POST', '/tokens', { key: writer, body: { type: 'token', data: 'secret' } })).body.id as string
const { port } = new URL(app.url)

/** A request whose headers and first bytes go out now; `finish` sends the rest and resolves with the status line and body. */
async function started(path: string, headers: Record<string, string>, body: string) {
  const socket = net.connect(Number(port), '127.0.0.1')
  await new Promise((resolve) => socket.once('connect', resolve))
  const head = Object.entries({ ...headers, 'Content-Type': 'application/json', 'Content-Length': String(Buffer.byteLength(body)), Connection: 'close' }).map(([k, v]) => `${k}: ${v}\r\n`).join('')
  socket.write(`POST ${path} HTTP/1.1\r\nHost: x\r\n${head}\r\n${body.slice(0, 3)}`)
  let answer = ''
  socket.on('data', (chunk: Buffer) => (answer += chunk.toString()))
  const ended = new Promise((resolve) => socket.once('close', resolve))
  await new Promise((resolve) => setTimeout(resolve, 200))
  return async () => {
    socket.write(body.slice(3))
    await ended
    return { status: Number(answer.split(' ')[1]), text: answer }
  }
}

const victim = async (permissions: string[]) => {
  const created = await app.request('POST', '/applications', { body: { name: 'victim', type: 'private', rules: [{ priority: 1, container: '/', transform: 'reveal', permissions }] } })
  return { id: created.body.id as string, key: created.body.key as string }
}
const detokenize = JSON.stringify({ v: `{{ ${secret} }}` })

t.test('a key regenerated while the body was on its way: 401 once the body is in', async (t) => {
  const { id, key } = await victim(['token:read', 'token:use'])
  const finish = await started('/detokenize', { 'SVC-API-KEY': key }, detokenize)
  t.equal((await app.request('POST', `/applications/${id}/regenerate`)).status, 200)
  const res = await finish()
  t.equal(res.status, 401)
  t.notMatch(res.text, 'secret')
})

t.test('an Application narrowed while the body was on its way: the route checks what it holds now', async (t) => {
  const { id, key } = await victim(['token:read', 'token:use'])
  const finish = await started('/detokenize', { 'SVC-API-KEY': key }, detokenize)
  t.equal((await app.request('PUT', `/applications/${id}`, { body: { name: 'victim', rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:create'] }] } })).status, 200)
  const res = await finish()
  t.equal(res.status, 403)
  t.notMatch(res.text, 'secret')
})

t.test('/proxy: a key deleted while the body was on its way sends nothing', async (t) => {
  const { id, key } = await victim(['token:use'])
  const before = stub.seen.length
  const finish = await started('/proxy', { 'SVC-API-KEY': key, 'SVC-PROXY-URL': stub.origin }, detokenize)
  t.equal((await app.request('DELETE', `/applications/${id}`)).status, 204)
  t.equal((await finish()).status, 401)
  t.equal(stub.seen.length, before, 'the destination received nothing')
})

t.test('a pre-configured proxy deleted while the body was on its way sends nothing', async (t) => {
  const { id } = await victim(['token:use'])
  const proxy = await app.request('POST', '/proxies', { body: { name: 'keyless', destination_url: stub.origin, require_auth: false, application: { id } } })
  t.equal(proxy.status, 201)
  const before = stub.seen.length
  const finish = await started('/proxy', { 'SVC-PROXY-KEY': proxy.body.key }, detokenize)
  t.equal((await app.request('DELETE', `/proxies/${proxy.body.id}`)).status, 204)
  const res = await finish()
  t.ok(res.status === 401 || res.status === 403, `refused (${res.status})`)
  t.equal(stub.seen.length, before, 'the destination received nothing')
})

t.test('an idempotency key does not carry a revoked key past the body: the stage that reads it checks again', async (t) => {
  const payments = await victim(['token:read', 'token:use'])
  const rules = [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:read', 'token:use'] }]
  const manager = await app.request('POST', '/applications', { body: { name: 'manager', type: 'management', permissions: ['application:read', 'application:update'], rules } })
  t.equal(manager.status, 201)
  const keysBefore = (await app.request('GET', `/applications/${payments.id}/keys`)).body.length as number
  const finish = await started(`/applications/${payments.id}/keys`, { 'SVC-API-KEY': manager.body.key, 'SVC-IDEMPOTENCY-KEY': 'mint-1' }, `{}${' '.repeat(16)}`)
  t.equal((await app.request('DELETE', `/applications/${manager.body.id}`)).status, 204)
  const res = await finish()
  t.equal(res.status, 401)
  t.notMatch(res.text, 'tsr_priv_')
  t.equal((await app.request('GET', `/applications/${payments.id}/keys`)).body.length, keysBefore, 'no key was minted')
})

t.test('a pre-configured proxy re-pointed while the body was on its way sends to its new destination', async (t) => {
  const { id } = await victim(['token:use'])
  const moved = await startStub(t)
  const proxy = await app.request('POST', '/proxies', { body: { name: 'moving', destination_url: stub.origin, require_auth: false, application: { id } } })
  t.equal(proxy.status, 201)
  const before = stub.seen.length
  const finish = await started('/proxy', { 'SVC-PROXY-KEY': proxy.body.key }, detokenize)
  t.equal((await app.request('PUT', `/proxies/${proxy.body.id}`, { body: { name: 'moving', destination_url: moved.origin, require_auth: false, application: { id } } })).status, 200)
  t.equal((await finish()).status, 200)
  t.equal(stub.seen.length, before, 'the old destination received nothing')
  t.equal(moved.seen.length, 1, 'the new one received the call')
})
