import { randomBytes, randomUUID } from 'node:crypto'
import { readFileSync } from 'node:fs'
import t from 'tap'
import { runAuditPrune } from '../../src/audit/prune-cli.js'
import { testConfig } from '../../src/config/index.js'
import { openStore } from '../../src/store/index.js'
import { startTestApp } from '../helpers/app.js'
import { auditEvent, auditLogWithClock, schemaUrl } from '../helpers/audit.js'

const DAY = 24 * 60 * 60 * 1000

// The grants docs/audit-grants.sql documents, applied to real roles: the service's role can
// append and read the audit log but not change or remove it; the pruner role can prune.
t.test('docs/audit-grants.sql makes the audit log append-only for the service role', { skip: process.env.DATABASE_URL ? false : 'needs DATABASE_URL (PGlite has no roles)' }, async (t) => {
  const app = await startTestApp(t)
  // The bootstrap tenant's chain (tenant.create, application.create) is checkpointed now, so the
  // service role's maintenance below has only the test tenant's chain to look at.
  t.same(await app.services.audit.maintain(), { checkpoints: 1, pruned: 0 })
  const suffix = randomBytes(4).toString('hex')
  const [svc, pruner] = [`tessera_app_${suffix}`, `tessera_pruner_${suffix}`]
  const admin = app.services.store.db.knex
  for (const role of [svc, pruner]) await admin.raw(`create role ${role} login`)
  t.teardown(async () => {
    for (const role of [svc, pruner]) await admin.raw(`drop owned by ${role}; drop role ${role}`).catch(() => undefined)
  })
  const sql = readFileSync(new URL('../../docs/audit-grants.sql', import.meta.url), 'utf8')
    .replaceAll('tessera_app', svc)
    .replaceAll('tessera_pruner', pruner)
    .replaceAll('public', app.schema!)
  await admin.raw(sql)

  // The service role: starts (the migration check passes), appends, reads, verifies.
  const config = testConfig({ DATABASE_URL: schemaUrl(app, svc), SVC_KEY_HASH_SECRET: app.config.keyHashSecret!, SVC_AUDIT_PRUNE_IN_SERVICE: 'false' })
  const store = await openStore(config)
  t.teardown(() => store.db.close())
  const tenant = randomUUID()
  let now = new Date(Date.now() - 30 * DAY)
  const audit = auditLogWithClock({ ...app, services: { ...app.services, store }, config }, () => now, { checkpointEvery: 2 })
  t.teardown(() => audit.close())
  for (let i = 0; i < 4; i++) await audit.record([auditEvent(tenant)])
  t.same(await audit.maintain(now), { checkpoints: 0, pruned: 0 }, 'maintenance as the service role checkpoints, never prunes')
  t.ok((await audit.verify({ tenantId: tenant })).ok)

  const denied = /permission denied/
  await t.rejects(store.db.knex('audit_events').where({ tenant_id: tenant }).update({ status: 500 }), denied, 'no UPDATE')
  await t.rejects(store.db.knex('audit_events').where({ tenant_id: tenant }).delete(), denied, 'no DELETE')
  await t.rejects(store.db.knex('audit_checkpoints').where({ tenant_id: tenant }).delete(), denied, 'no DELETE of checkpoints')
  await t.rejects(store.db.knex.raw('truncate audit_events'), denied, 'no TRUNCATE')
  await t.rejects(store.db.knex.raw('alter table audit_events disable trigger audit_events_no_update'), /must be owner/, 'cannot switch off the trigger')

  // The pruner role: removes what is past retention (1 day here), nothing else.
  const prunerConfig = testConfig({ DATABASE_URL: schemaUrl(app, pruner), SVC_AUDIT_RETENTION_DAYS: '1' })
  now = new Date()
  t.equal(await runAuditPrune(prunerConfig, now), 4, 'the four 30-day-old entries')
  const prunerStore = await openStore(prunerConfig, { migrate: false })
  t.teardown(() => prunerStore.db.close())
  await t.rejects(prunerStore.db.knex('audit_events').insert({}), denied, 'the pruner cannot write entries')
  await audit.record([auditEvent(tenant)])
  t.match((await audit.verify({ tenantId: tenant })).tenants[0]?.break, { reason: 'pruned_within_retention' }, 'a verifier expecting 400 days of entries objects')
  const sameRetention = auditLogWithClock({ ...app, services: { ...app.services, store }, config }, () => now, { retentionDays: 1 })
  t.teardown(() => sameRetention.close())
  t.match((await sameRetention.verify({ tenantId: tenant })).tenants[0], { ok: true, anchorSeq: 4, entries: 1 }, 'one with the pruner retention verifies')
})
