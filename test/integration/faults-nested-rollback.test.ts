import t from 'tap'
import { randomUUID } from 'node:crypto'
import { startTestApp } from '../helpers/app.js'
import { startFaultProxy } from '../helpers/fault-proxy.js'
import { application } from '../helpers/tokens.js'

// Postgres behind a fault proxy this test controls: the shared server is never frozen.
const skip = process.env.DATABASE_URL ? false : 'needs DATABASE_URL (faults of a Postgres connection)'
const BOUNDS = { SVC_DB_STATEMENT_TIMEOUT_MS: '1000', SVC_DB_ACQUIRE_TIMEOUT_MS: '500', SVC_READY_TIMEOUT_MS: '500' }

/**
 * An Application change runs its update in a nested transaction (a savepoint). When that
 * connection stops answering before the COMMIT, nothing changed: the answer says so, and the
 * idempotency key is given up, so a retry with it runs (it was 409 "withheld" for good, for a
 * change that never happened, since the failing ROLLBACK was read as a write that may have landed).
 */
t.test('an Application change cut before its commit says nothing changed, and a retry runs', { skip }, async (t) => {
  const proxy = await startFaultProxy(t, process.env.DATABASE_URL!)
  const app = await startTestApp(t, { ...BOUNDS, DATABASE_URL: proxy.url })
  t.teardown(() => proxy.resume())
  const target = await application(app, { type: 'private', permissions: ['token:read'] })
  const headers = { 'SVC-IDEMPOTENCY-KEY': `regen-${randomUUID()}` }
  const cut = proxy.partitionAfter('update "applications"')
  const answer = app.request('POST', `/applications/${target.id}/regenerate`, { headers })
  await cut
  const failed = await answer
  t.equal(failed.status, 503, failed.text)
  t.match(failed.body.detail, /nothing was changed/)
  proxy.resume()
  t.equal((await app.request('GET', `/tokens/${randomUUID()}`, { key: target.key })).status, 404, 'the old key still authenticates')
  const retried = await app.request('POST', `/applications/${target.id}/regenerate`, { headers })
  t.equal(retried.status, 200, retried.text)
  t.equal((await app.request('GET', `/tokens/${randomUUID()}`, { key: target.key })).status, 401, 'the retry regenerated it')
})
