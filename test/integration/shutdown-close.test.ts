import t from 'tap'
import { AppError } from '../../src/errors/index.js'
import { startTestApp, type TestApp } from '../helpers/app.js'
import { openForwarder, rawDestination, startRawStub, startStub } from '../helpers/stub-server.js'
import { until } from '../helpers/wait.js'

const backend = process.env.DATABASE_URL ? 'Postgres' : 'PGlite'

async function proxyCaller(app: TestApp): Promise<{ key: string; tenantId: string }> {
  const rules = [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:use'] }]
  const res = await app.request('POST', '/applications', { body: { name: 'caller', type: 'private', rules } })
  return { key: res.body.key as string, tenantId: res.body.tenant_id as string }
}

/**
 * The order the audit log and the database are closed in, and what `written()` finds in the
 * database when it is about to close (after the flush, the last moment anything can be read).
 */
function watchClosing(app: TestApp, written: () => Promise<unknown> = async () => undefined): { calls: string[]; found: unknown[] } {
  const calls: string[] = []
  const found: unknown[] = []
  const { db } = app.services.store
  const closeDb = db.close.bind(db)
  db.close = async () => {
    calls.push('database')
    found.push(await written())
    return closeDb()
  }
  const audit = app.services.audit
  const closeAudit = audit.close.bind(audit)
  audit.close = () => (calls.push('audit'), closeAudit())
  return { calls, found }
}

t.test(`after the deadline aborted a destination call, close() still flushes its entry and closes the database (${backend})`, async (t) => {
  const app = await startTestApp(t)
  const { key, tenantId } = await proxyCaller(app)
  const stub = await startStub(t, () => {}) // never answers
  const call = app.request('POST', '/proxy/charge', { key, rawBody: 'x', headers: { 'SVC-PROXY-URL': stub.origin } })
  await until(() => stub.seen.length === 1, 'the call reached the destination')
  const entries = async () => (await app.services.audit.list(tenantId, { actions: ['proxy.call'], outcomes: [] }, undefined, 10)).length
  const closing = watchClosing(app, entries)

  await app.services.abortInFlight()
  const answer = await call
  t.equal(answer.status, 504, 'the destination got the call: its outcome is unknown, answered as a time-out')
  t.match(answer.body, { proxy_error: { type: '/problems/destination-timeout', detail: /whether the destination acted on it is unknown/ } })
  t.equal(answer.headers.get('retry-after'), null, 'not an invitation to send it again')
  await t.resolves(app.services.close(), 'close() does not fail on the aborted forwarder')
  t.same(closing.calls, ['audit', 'database'], 'the audit queue is flushed, then the database closed')
  t.same(closing.found, [1], 'the aborted call has its entry')
})

t.test('a close step that hangs does not keep the audit flush and the database from closing', async (t) => {
  const app = await startTestApp(t)
  const closing = watchClosing(app)
  // As a Redis that no longer answers QUIT.
  const { limiter } = app.services
  const closeLimiter = limiter.close.bind(limiter)
  t.teardown(closeLimiter)
  limiter.close = () => new Promise<void>(() => {})
  let bound: NodeJS.Timeout | undefined
  const hung = new Promise<string>((resolve) => (bound = setTimeout(resolve, 3000, 'hung')))
  const outcome = await Promise.race([app.services.close({ releaseMs: 50, auditMs: 1000, databaseMs: 1000 }).then(() => 'closed'), hung])
  clearTimeout(bound)
  t.equal(outcome, 'closed')
  t.same(closing.calls, ['audit', 'database'])
})

t.test('a destination call aborted at shutdown, sent or still queued, is 504 without Retry-After: its outcome is unknown', async (t) => {
  const stub = await startStub(t, () => {}) // takes the request, never answers
  // Accepts the connection and says nothing: a TLS handshake that never ends, so nothing is sent.
  const silent = await startRawStub(t, () => {})
  const forwarder = openForwarder(t, { timeoutMs: 30_000 })
  const sent = forwarder.forward({ method: 'POST', destination: rawDestination(`${stub.origin}/charge`), headers: {}, body: 'x' }).catch((e: unknown) => e)
  const unsent = forwarder.forward({ method: 'POST', destination: rawDestination(`https://127.0.0.1:${silent}/charge`), headers: {}, body: 'x' }).catch((e: unknown) => e)
  await until(() => stub.seen.length === 1, 'the first call reached its destination')

  await forwarder.abort()
  const [afterSending, beforeSending] = await Promise.all([sent, unsent])
  t.ok(afterSending instanceof AppError)
  t.match(afterSending, { status: 504, code: 'destination_timeout' })
  t.equal((afterSending as AppError).headers?.['Retry-After'], undefined)
  t.match(beforeSending, { status: 504, code: 'destination_timeout' })
  t.equal((beforeSending as AppError).headers?.['Retry-After'], undefined)
  await t.resolves(forwarder.close(), 'close() after abort() has nothing left to do')
})
