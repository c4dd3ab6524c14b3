import { randomUUID } from 'node:crypto'
import t from 'tap'
import { AppError } from '../../src/errors/index.js'
import { startTestApp } from '../helpers/app.js'
import { auditEvent, auditRows } from '../helpers/audit.js'

const app = await startTestApp(t, { SVC_AUDIT_WRITE_TIMEOUT_MS: '300' })
const knex = app.services.store.db.knex

const refusal = (p: Promise<unknown>) => p.then(() => undefined, (e: unknown) => e)

t.test('a write the database refuses: 503 unavailable, /readyz down, and back once it recovers', async (t) => {
  const tenant = randomUUID()
  await knex.raw('alter table audit_events rename to audit_events_away')
  try {
    const err = await refusal(app.services.audit.record([auditEvent(tenant)]))
    t.type(err, AppError)
    t.match(err, { status: 503, code: 'unavailable' })
    const ready = await app.request('GET', '/readyz', { key: null })
    t.equal(ready.status, 503)
    t.equal(ready.body.components.audit, 'down')
  } finally {
    await knex.raw('alter table audit_events_away rename to audit_events')
  }
  await app.services.audit.record([auditEvent(tenant)])
  t.equal((await app.request('GET', '/readyz', { key: null })).body.components.audit, 'ok')
  t.same((await auditRows(app, tenant)).map((r) => r.seq), [1], 'the failed batch left no trace in the chain')
  t.ok((await app.services.audit.verify({ tenantId: tenant })).ok)
})

t.test('a database that does not answer in time: 503 after the write time-out, the chain intact after', async (t) => {
  const tenant = randomUUID()
  await app.services.audit.record([auditEvent(tenant)])
  // Holds the chain head (Postgres) or the only connection (PGlite), as a stuck database would.
  const blocker = await knex.transaction()
  await blocker('audit_chain_heads').where({ tenant_id: tenant }).forUpdate()
  try {
    const err = await refusal(app.services.audit.record([auditEvent(tenant)]))
    t.match(err, { status: 503, code: 'unavailable' })
  } finally {
    await blocker.rollback()
  }
  await app.services.audit.flush()
  await app.services.audit.record([auditEvent(tenant)])
  t.ok((await app.services.audit.verify({ tenantId: tenant })).ok, 'whatever was written is a valid chain')
})
