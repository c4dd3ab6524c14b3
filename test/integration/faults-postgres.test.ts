import t, { type Test } from 'tap'
import { startTestApp, type TestApp, type TestResponse } from '../helpers/app.js'
import { startFaultProxy, type FaultProxy } from '../helpers/fault-proxy.js'
import { appKey } from '../helpers/tokens.js'
import { timed, until } from '../helpers/wait.js'
import { countQueries } from '../helpers/audit.js'

// Postgres behind a fault proxy this test controls: the shared server is never frozen.
const skip = process.env.DATABASE_URL ? false : 'needs DATABASE_URL (faults of a Postgres connection)'

const BOUNDS = { SVC_DB_STATEMENT_TIMEOUT_MS: '1000', SVC_DB_ACQUIRE_TIMEOUT_MS: '500', SVC_READY_TIMEOUT_MS: '500', SVC_DB_LISTENER_BACKOFF_MAX_MS: '400' }
// The longest a database wait may take: acquire, then a statement and the client's margin.
const BOUND_MS = 500 + 1000 + 1000
// Room for scheduling on a loaded machine; what is asserted is "bounded", not "fast".
const SLACK_MS = 1500

async function setup(t: Test): Promise<{ app: TestApp; proxy: FaultProxy; key: string; token: string }> {
  const proxy = await startFaultProxy(t, process.env.DATABASE_URL!)
  const app = await startTestApp(t, { ...BOUNDS, DATABASE_URL: proxy.url })
  t.teardown(() => proxy.resume())
  const key = await appKey(app, { type: 'private', rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:create', 'token:read', 'token:use'] }] })
  const created = await app.request('POST', '/tokens', { key, body: { type: 'token', data: 'kept' } })
  t.equal(created.status, 201)
  return { app, proxy, key, token: created.body.id as string }
}

/** Requests that each need the database (an unknown key, an uncached read, a write, a list). */
function databaseRequests(app: TestApp, key: string, token: string) {
  return [
    app.request('GET', '/readyz', { key: null }),
    app.request('POST', '/tokens', { key, body: { type: 'token', data: 'during the fault' } }),
    app.request('GET', `/tokens/${token}`, { key }),
    app.request('GET', '/applications'),
    app.request('GET', '/tokens', { key: 'key_' + 'x'.repeat(40) }),
  ].map((p) => timed(p))
}

function assertUnavailable(t: Test, results: { value: TestResponse; ms: number }[]): void {
  const [ready, ...rest] = results
  t.equal(ready!.value.status, 503, '/readyz answers 503')
  t.equal(ready!.value.body.status, 'down')
  t.equal(ready!.value.body.components.database, 'down')
  for (const { ms } of results) t.ok(ms < BOUND_MS + SLACK_MS, `answered within its bound (${ms} ms)`)
  for (const { value: res } of rest) {
    t.equal(res.status, 503, 'a request that cannot reach the database gets 503')
    t.equal(res.body.type, '/problems/unavailable')
    t.ok(Number(res.headers.get('retry-after')) > 0, 'with Retry-After')
    t.equal(res.headers.get('content-type'), 'application/problem+json')
  }
}

async function assertRecovered(t: Test, app: TestApp, key: string, token: string): Promise<void> {
  await until(async () => (await app.request('GET', '/readyz', { key: null })).status === 200, 'readiness back')
  await until(async () => app.services.bus.live, 'listener back')
  t.equal((await app.request('POST', '/tokens', { key, body: { type: 'token', data: 'after' } })).status, 201, 'writes work again')
  t.equal((await app.request('GET', `/tokens/${token}`, { key })).body.data, 'kept', 'nothing lost')
  // Caches are on again: the second authentication of a key costs no query.
  await app.request('GET', '/applications')
  const queries = countQueries(t, app)
  const res = await app.request('POST', '/detokenize', { key, body: { x: `{{ ${token} }}` } })
  const before = queries()
  t.equal((await app.request('POST', '/detokenize', { key, body: { x: `{{ ${token} }}` } })).status, res.status)
  t.equal(queries() - before, 0, 'authentication and token served from the caches again')
}

t.test('Postgres frozen: bounded 503s, readiness down, caches off; then full recovery', { skip }, async (t) => {
  const { app, proxy, key, token } = await setup(t)
  proxy.pause()
  assertUnavailable(t, await Promise.all(databaseRequests(app, key, token)))
  await until(async () => !app.services.bus.live, 'the heartbeat notices the frozen listener')
  t.equal((await app.request('GET', '/applications')).status, 503, 'no cached principal is served while notifications may be missed')
  proxy.resume()
  await assertRecovered(t, app, key, token)
})

t.test('Postgres connections reset and refused (a crash): 503, then recovery without restart', { skip }, async (t) => {
  const { app, proxy, key, token } = await setup(t)
  proxy.drop()
  assertUnavailable(t, await Promise.all(databaseRequests(app, key, token)))
  await until(async () => !app.services.bus.live, 'the listener is lost')
  proxy.resume()
  await assertRecovered(t, app, key, token)
})
