import t, { type Test } from 'tap'
import { startTestApp } from '../helpers/app.js'
import { rawRequest } from '../helpers/proxy.js'
import { startStub } from '../helpers/stub-server.js'
import { application } from '../helpers/tokens.js'

// SVC_MAX_EXPRESSION_TOKENS counts distinct tokens; one token referenced again and again is
// bounded by the bytes of token data the references add up to: the larger of the body limit and
// the Reactor payload limit. A 4 MB body of 100,000 references to a 64 KB token once built
// gigabytes and killed the process.
const LIMIT = 64 * 1024
const app = await startTestApp(t, { SVC_BODY_LIMIT_BYTES: String(LIMIT), SVC_REACTOR_PAYLOAD_MAX_BYTES: String(LIMIT / 2) })
const caller = await application(app, { type: 'private', rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:create', 'token:read', 'token:use'] }] })
const key = caller.key
const big = (await app.request('POST', '/tokens', { key, body: { type: 'token', data: 'x'.repeat(20_000) } })).body.id as string
const refs = (n: number) => Array.from({ length: n }, () => `{{ ${big} }}`)

const assertTooLarge = (t: Test, res: { status: number; body: Record<string, unknown> }, label: string) => {
  t.equal(res.status, 413, label)
  t.match(res.body, { type: '/problems/payload-too-large', detail: /more than 65536 bytes of token data/ }, `${label}: a problem naming the bound`)
}

t.test('/detokenize: three references fit, a fourth is 413', async (t) => {
  const fits = await app.request('POST', '/detokenize', { key, body: refs(3) })
  t.equal(fits.status, 200)
  t.equal(fits.body[2].length, 20_000)
  assertTooLarge(t, await app.request('POST', '/detokenize', { key, body: refs(4) }), 'an array')
  assertTooLarge(t, await app.request('POST', '/detokenize', { key, body: { text: refs(4).join(' and ') } }), 'one string')
  assertTooLarge(t, await app.request('POST', '/detokenize', { key, body: refs(1000) }), 'a thousand')
})

t.test('/proxy: nothing is forwarded past the bound', async (t) => {
  const stub = await startStub(t)
  const send = (body: string, headers: string[] = ['Content-Type', 'application/json']) =>
    rawRequest(app.url, { method: 'POST', path: '/proxy', body, headers: ['SVC-API-KEY', key, 'SVC-PROXY-URL', stub.origin, ...headers] })
  t.equal((await send(JSON.stringify(refs(3)))).status, 200)
  const before = stub.seen.length
  for (const [label, res] of [
    ['a JSON body', await send(JSON.stringify(refs(4)))],
    ['a text body', await send(refs(4).join(','), ['Content-Type', 'text/plain'])],
    ['body and headers together', await send(JSON.stringify(refs(3)), ['Content-Type', 'application/json', 'X-A', `{{ ${big} }}`])],
  ] as const) {
    t.equal(res.status, 413, label)
    t.match(JSON.parse(res.body.toString()), { proxy_error: { status: 413, detail: /bytes of token data/ } })
  }
  t.equal(stub.seen.length, before, 'not one reached the destination')
})

t.test('Reactors: args and the detokenize bridge', async (t) => {
  const reactor = await app.request('POST', '/reactors', {
    body: { name: 'bridge', code: "module.exports = async (req) => { const refs = Array.from({ length: req.args.n }, () => '{{ ' + req.args.id + ' }}'); try { return { raw: (await req.svc.detokenize(refs)).length } } catch (e) { return { raw: String(e.message) } } }", application: { id: caller.id } },
  })
  t.equal(reactor.status, 201)
  const react = (body: unknown) => app.request('POST', `/reactors/${reactor.body.id}/react`, { key, body })
  assertTooLarge(t, await react({ args: { echo: refs(4) } }), 'args')
  t.equal((await react({ args: { id: big, n: 1 } })).body.raw, 1, 'one reference through the bridge is fine')
  const bridged = await react({ args: { id: big, n: 4 } })
  t.equal(bridged.status, 200, bridged.text.slice(0, 300))
  t.match(bridged.body.raw, /bytes of token data/, 'the bridge refuses, the Reactor gets the reason')
  t.equal((await app.request('GET', '/healthz', { key: null })).status, 200, 'the service is fine')
})

t.test('a reference a key may not see counts what it renders: where the 413 starts tells nothing of the data', async (t) => {
  const app = await startTestApp(t, { SVC_BODY_LIMIT_BYTES: '4000', SVC_REACTOR_PAYLOAD_MAX_BYTES: '4000' })
  const writer = await application(app, { type: 'private', rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:create'] }] })
  const create = async (data: unknown) => (await app.request('POST', '/tokens', { key: writer.key, body: { type: 'token', data } })).body.id as string
  const short = await create('x'.repeat(16))
  const long = await create('x'.repeat(1000))
  const redact = await application(app, { type: 'private', rules: [{ priority: 1, container: '/', transform: 'redact', permissions: ['token:read'] }] })
  const status = async (id: string, n: number) => (await app.request('POST', '/detokenize', { key: redact.key, body: Array(n).fill(`{{ ${id} }}`) })).status
  for (const n of [4, 40, 200]) t.equal(await status(long, n), await status(short, n), `${n} references: the same answer for 16 and 1,000 hidden characters`)
})
