import { randomBytes } from 'node:crypto'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import t from 'tap'
import { startTestApp } from '../helpers/app.js'
import { rawRequest } from '../helpers/proxy.js'
import { startStub } from '../helpers/stub-server.js'
import { appKey, card } from '../helpers/tokens.js'

t.test('answers written by Reactor or transform code keep Tessera\'s own Cache-Control and RateLimit-* headers', async (t) => {
  const app = await startTestApp(t, { SVC_LOG_LEVEL: 'fatal' })
  const rules = [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:create', 'token:read', 'token:use'] }]
  const caller = await appKey(app, { name: 'caller', type: 'private', rules })
  const actor = await app.request('POST', '/applications', { body: { name: 'actor', type: 'private', rules } })
  const token = await app.request('POST', '/tokens', { key: caller, body: { type: 'card', data: card() } })
  t.equal(token.status, 201)

  const code = "module.exports = async (req) => { throw new CustomHttpResponseError({ status: 200, headers: { 'Cache-Control': 'public, max-age=86400', 'RateLimit-Remaining': '999999', 'RateLimit-Limit': '1' }, body: { card: req.args.card } }) }"
  const reactor = await app.request('POST', '/reactors', { body: { name: 'r', code, application: { id: actor.body.id } } })
  t.equal(reactor.status, 201, reactor.text)
  const res = await rawRequest(app.url, { method: 'POST', path: `/reactors/${reactor.body.id}/react`, headers: ['SVC-API-KEY', caller, 'Content-Type', 'application/json'], body: JSON.stringify({ args: { card: `{{ ${token.body.id as string} }}` } }) })
  t.equal(res.status, 200)
  t.equal(res.headers['cache-control'], 'no-store', 'a Reactor answer holding revealed card data stays no-store (README "Answers are not cached")')
  t.not(res.headers['ratelimit-remaining'], '999999', 'the RateLimit-* set is Tessera\'s own, as for the proxy')

  // A pre-configured proxy whose destination sends no Cache-Control, with a response transform adding one.
  const echo = await startStub(t)
  const proxy = await app.request('POST', '/proxies', { body: { name: 'p', destination_url: echo.origin, application: { id: actor.body.id }, response_transform: { code: "module.exports = async (req) => ({ headers: { ...req.args.headers, 'cache-control': 'public, max-age=86400', 'ratelimit-remaining': '999999' } })" } } })
  t.equal(proxy.status, 201, proxy.text)
  const sent = await rawRequest(app.url, { method: 'POST', path: '/proxy', headers: ['SVC-PROXY-KEY', proxy.body.key, 'SVC-API-KEY', caller, 'Content-Type', 'application/json'], body: JSON.stringify({ n: `{{ ${token.body.id as string} | json: '$.number' }}` }) })
  t.equal(sent.status, 200)
  t.equal(sent.headers['cache-control'], 'no-store', 'the destination sent no Cache-Control: the proxied answer is no-store (README)')
  t.not(sent.headers['ratelimit-remaining'], '999999')
})

const OPERATOR_KEY = `operator-${randomBytes(24).toString('hex')}`

t.test('statuses a destination chooses add no label values', async (t) => {
  const app = await startTestApp(t, { SVC_METRICS: 'operator', SVC_OPERATOR_KEY: OPERATOR_KEY, SVC_RATE_LIMIT_ENABLED: 'false', SVC_LOG_LEVEL: 'fatal' })
  const key = await appKey(app, { type: 'private', rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:use'] }] })
  // The caller's own destination answers with whatever status the path names.
  const server = http.createServer((req, res) => {
    res.writeHead(Number((req.url ?? '/200').split('/')[1]) || 200)
    res.end()
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise((resolve) => server.close(resolve)))
  const target = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  const seen = new Set<number>()
  for (const method of ['GET', 'POST']) {
    for (let s = 200; s <= 599; s += 3) {
      const res = await rawRequest(app.url, { method, path: `/proxy/${s}`, headers: ['SVC-API-KEY', key, 'SVC-PROXY-URL', target] })
      seen.add(res.status)
    }
  }
  const scrape = await app.request('GET', '/metrics', { key: OPERATOR_KEY })
  const statuses = new Set([...scrape.text.matchAll(/tessera_http_requests_total\{route="\/proxy\/\*",method="\w+",status="(\w+)"\}/g)].map((m) => m[1]))
  t.ok(seen.size > 100, 'the destination chose over a hundred statuses')
  t.ok(statuses.size <= 18 + 4, `the status label stays Tessera's own statuses and four classes (${[...statuses].join(', ')})`)
  t.ok(statuses.has('2xx') && statuses.has('5xx') && statuses.has('404'))
})
