import { randomBytes } from 'node:crypto'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import t from 'tap'
import { ConfigError, loadConfig } from '../../src/config/index.js'
import { startMetricsServer } from '../../src/metrics/exposition.js'
import { startTestApp, type TestApp } from '../helpers/app.js'
import { appKey, card } from '../helpers/tokens.js'
import { eventually } from '../helpers/wait.js'

const OPERATOR_KEY = `operator-${randomBytes(24).toString('hex')}`

/** The value of one sample line (`name{labels} value`), or undefined when absent. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue
    if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) return Number(line.slice(line.lastIndexOf(' ') + 1))
  }
  return undefined
}

async function scrape(app: TestApp): Promise<string> {
  const res = await app.request('GET', '/metrics', { key: OPERATOR_KEY })
  if (res.status !== 200) throw new Error(`scrape: ${res.status} ${res.text}`)
  return res.text
}

/** A plain HTTP destination for the proxy (the tests allow http and private addresses). */
async function destination(t: { teardown(fn: () => unknown): void }): Promise<string> {
  const server = http.createServer((req, res) => res.writeHead(req.url === '/missing' ? 404 : 200, { 'Content-Type': 'application/json' }).end('{"ok":true}'))
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise((resolve) => server.close(resolve)))
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

t.test('GET /metrics behind the operator key, after traffic of every kind', async (t) => {
  const app = await startTestApp(t, { SVC_METRICS: 'operator', SVC_OPERATOR_KEY: OPERATOR_KEY, SVC_RATE_LIMIT_TOKENS_SEARCH: '1/60' })
  const key = await appKey(app, { type: 'private', rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:create', 'token:read', 'token:search', 'token:use'] }] })
  const tokenId = `order-${randomBytes(8).toString('hex')}`
  t.equal((await app.request('POST', '/tokens', { key, body: { id: tokenId, type: 'card', data: card() } })).status, 201)
  t.equal((await app.request('GET', `/tokens/${tokenId}`, { key })).status, 200)
  t.equal((await app.request('GET', `/tokens/missing-${tokenId}`, { key })).status, 404)
  t.equal((await app.request('POST', '/detokenize', { key, body: { n: `{{ ${tokenId} | json: '$.number' }}` } })).status, 200)
  t.equal((await app.request('GET', `/no-such-route/${tokenId}`, { key })).status, 404)
  t.equal((await app.request('GET', `/tokens/${tokenId}`, { key: null })).status, 401)
  t.equal((await app.request('POST', '/tokens/search', { key, body: { query: 'type:card' } })).status, 200)
  t.equal((await app.request('POST', '/tokens/search', { key, body: { query: 'type:card' } })).status, 429)
  const target = await destination(t)
  const proxied = await app.request('POST', '/proxy', { key, headers: { 'SVC-PROXY-URL': target }, body: { n: `{{ ${tokenId} | json: '$.number' }}` } })
  t.equal(proxied.status, 200, proxied.text)
  t.equal((await app.request('GET', '/proxy/missing', { key, headers: { 'SVC-PROXY-URL': target } })).status, 404)
  const reactor = await app.request('POST', '/reactors', { body: { name: 'r', code: 'module.exports = async (req) => ({ raw: req.args })' } })
  t.equal((await app.request('POST', `/reactors/${reactor.body.id}/react`, { key, body: { args: { a: 1 } } })).status, 200)

  const text = await scrape(app)
  t.ok(sample(text, 'tessera_http_requests_total', { route: '/tokens/:id', method: 'GET', status: '200' })! >= 1, 'requests by route template')
  t.ok(sample(text, 'tessera_http_requests_total', { route: '/tokens/:id', method: 'GET', status: '404' })! >= 1)
  t.ok(sample(text, 'tessera_http_requests_total', { route: 'unmatched', status: '404' })! >= 1, 'unmatched paths are one label')
  t.equal(sample(text, 'tessera_http_requests_total', { route: '/tokens/:id', method: 'GET', status: '401' }), 1, 'refused before the route ran: still its template')
  t.notMatch(text, /route="[^/u]/, 'every route label is a template, /proxy/* or unmatched')
  t.ok(sample(text, 'tessera_http_requests_total', { route: '/proxy/*', method: 'POST', status: '200' })! >= 1)
  t.ok(sample(text, 'tessera_http_request_duration_seconds_count', { route: '/tokens', method: 'POST', status: '201' })! >= 1, 'latency histogram')
  t.equal(sample(text, 'tessera_proxy_destination_duration_seconds_count', { status_class: '2xx' }), 1, 'destination latency by status class')
  t.equal(sample(text, 'tessera_proxy_destination_duration_seconds_count', { status_class: '4xx' }), 1)
  t.equal(sample(text, 'tessera_detokenized_tokens_total', { permission: 'token:read' }), 1, '/detokenize')
  t.ok(sample(text, 'tessera_detokenized_tokens_total', { permission: 'token:use' })! >= 1, 'the proxy')
  t.equal(sample(text, 'tessera_rate_limit_decisions_total', { decision: 'limited', scope: 'tokens_search' }), 1, 'limiter decisions')
  t.ok(sample(text, 'tessera_rate_limit_decisions_total', { decision: 'allowed' })! > 5)
  t.equal(sample(text, 'tessera_rate_limit_degraded'), 0)
  t.equal(sample(text, 'tessera_reactor_invocations_total', { outcome: 'ok' }), 1, 'Reactor invocations by outcome')
  t.equal(sample(text, 'tessera_reactor_starts_total', { start: 'cold' }), 1, 'warm vs cold')
  t.equal(sample(text, 'tessera_reactor_calls', { state: 'queued' }), 0, 'queue depth')
  t.equal(sample(text, 'tessera_runtime_restarts_total'), 0)
  t.ok(sample(text, 'tessera_db_pool_connections', { state: 'free' }) !== undefined, 'pool use')
  t.equal(sample(text, 'tessera_db_unavailable_total', { phase: 'query' }), 0, 'query time-outs')
  t.ok(sample(text, 'tessera_audit_events_written_total') !== undefined, 'audit writes')
  t.ok(sample(text, 'process_cpu_user_seconds_total') !== undefined, 'process metrics')

  t.test('no tenant data, token ids or keys in the labels', async (t) => {
    const tenantId = (await app.request('GET', '/tenants/self')).body.id as string
    const secrets = { tokenId, tenantId, key, adminKey: app.adminKey, operatorKey: OPERATOR_KEY, number: card().number, reactorId: reactor.body.id as string, target }
    for (const [what, value] of Object.entries(secrets)) t.notOk(text.includes(value), `no ${what}`)
  })

  t.test('runtime child restarts are counted', async (t) => {
    process.kill(app.services.supervisor.pid!, 'SIGKILL')
    const restarted = await eventually(() => scrape(app), (text) => sample(text, 'tessera_runtime_restarts_total')! >= 1, 15_000)
    t.equal(sample(restarted, 'tessera_runtime_restarts_total'), 1)
  })

  t.test('the operator key is required', async (t) => {
    t.equal((await app.request('GET', '/metrics', { key: null })).status, 401)
    t.equal((await app.request('GET', '/metrics', { key: `${OPERATOR_KEY}x` })).status, 401)
    const wrong = await app.request('GET', '/metrics', { key })
    t.equal(wrong.status, 401, 'an Application key is not the operator key')
    t.match(wrong.headers.get('content-type'), /problem\+json/)
  })
})

t.test('waits on the database that fail are counted', async (t) => {
  // One connection, held by a transaction: the next query cannot get one within the acquire bound.
  const app = await startTestApp(t, { SVC_METRICS: 'operator', SVC_OPERATOR_KEY: OPERATOR_KEY, SVC_DB_POOL_MAX: '1', SVC_DB_ACQUIRE_TIMEOUT_MS: '100' })
  const { knex } = app.services.store.db
  let release!: () => void
  const held = new Promise<void>((resolve) => (release = resolve))
  let started!: () => void
  const holding = new Promise<void>((resolve) => (started = resolve))
  const trx = knex.transaction(async (trx) => {
    await trx.raw('select 1')
    started()
    await held
  })
  await holding
  const failed = await knex.raw('select 1').then(() => undefined, (err: unknown) => err as { status?: number })
  t.equal(failed?.status, 503, 'the wait is bounded')
  release()
  await trx
  const text = await scrape(app)
  t.ok(sample(text, 'tessera_db_unavailable_total', { phase: 'acquire' })! >= 1, 'acquire time-out counted')
  t.ok(sample(text, 'tessera_db_pool_connections', { state: 'pending' }) !== undefined)
})

t.test('SVC_METRICS=port: /metrics on a listener of its own', async (t) => {
  const app = await startTestApp(t, { SVC_METRICS: 'port', SVC_OPERATOR_KEY: OPERATOR_KEY })
  t.equal((await app.request('GET', '/metrics', { key: OPERATOR_KEY })).status, 404, 'not on the API port (nor with off, the default)')
  const server = await startMetricsServer(app.services.metrics, '127.0.0.1', 0, app.services.logger)
  t.teardown(() => new Promise((resolve) => server.close(resolve)))
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  await app.request('GET', '/permissions', { key: app.adminKey })
  const res = await fetch(`${base}/metrics`)
  t.equal(res.status, 200)
  t.match(res.headers.get('content-type'), /^text\/plain; version=0\.0\.4/)
  t.ok(sample(await res.text(), 'tessera_http_requests_total', { route: '/permissions', status: '200' })! >= 1)
  t.equal((await fetch(`${base}/other`)).status, 404)
  t.equal((await fetch(`${base}/metrics`, { method: 'POST' })).status, 404)
})

t.test('two processes keep two registries', async (t) => {
  const a = await startTestApp(t, { SVC_METRICS: 'operator', SVC_OPERATOR_KEY: OPERATOR_KEY })
  const b = await startTestApp(t, { SVC_METRICS: 'operator', SVC_OPERATOR_KEY: OPERATOR_KEY })
  await a.request('GET', '/permissions')
  await a.request('GET', '/permissions')
  await b.request('GET', '/permissions')
  t.equal(sample(await scrape(a), 'tessera_http_requests_total', { route: '/permissions' }), 2)
  t.equal(sample(await scrape(b), 'tessera_http_requests_total', { route: '/permissions' }), 1)
})

t.test('the metrics settings are validated', async (t) => {
  const problems = (env: Record<string, string>) => {
    try {
      loadConfig(env)
      return []
    } catch (err) {
      if (err instanceof ConfigError) return err.problems
      throw err
    }
  }
  t.match(problems({ SVC_METRICS: 'operator' }), [/SVC_METRICS=operator needs SVC_OPERATOR_KEY/])
  t.match(problems({ SVC_METRICS: 'yes' }), [/SVC_METRICS/])
  t.match(problems({ SVC_METRICS: 'port', PORT: '9464' }), [/SVC_METRICS_PORT \(9464\) must differ from PORT/])
  t.match(problems({ SVC_METRICS_PORT: '70000' }), [/SVC_METRICS_PORT/])
  t.same(problems({ SVC_METRICS: 'port', SVC_METRICS_PORT: '9100' }), [])
  t.equal(loadConfig({}).metrics.mode, 'off')
})
