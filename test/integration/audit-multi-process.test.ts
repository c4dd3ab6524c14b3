import { randomUUID } from 'node:crypto'
import t from 'tap'
import { startTestApp } from '../helpers/app.js'
import { auditEvent, auditLogWithClock, auditRows } from '../helpers/audit.js'

// Two Tessera processes appending to the same tenants' chains in one Postgres schema.
t.test('concurrent writers on one database keep every chain gapless and valid', { skip: process.env.DATABASE_URL ? false : 'needs DATABASE_URL (PGlite is one process)' }, async (t) => {
  const a = await startTestApp(t, { SVC_AUDIT_CHECKPOINT_EVERY: '50' })
  const b = await startTestApp(t, { SVC_AUDIT_CHECKPOINT_EVERY: '50' }, { reuse: a })
  const [x, y] = [randomUUID(), randomUUID()]
  const rounds = 30
  // Four requests per process per round; each writes one entry to each chain.
  const requests = rounds * 8
  // Each request writes to both tenants, in opposite orders in the two processes, so a batch
  // locks heads of several chains at once: tenant-ordered locking must keep that deadlock-free.
  // Rounds keep the two processes contending for the heads again and again.
  for (let round = 0; round < rounds; round++) {
    await Promise.all(
      Array.from({ length: 2 }, () => [
        a.services.audit.record([auditEvent(x), auditEvent(y)]),
        b.services.audit.record([auditEvent(y), auditEvent(x)]),
        a.services.audit.record([auditEvent(y), auditEvent(x)]),
        b.services.audit.record([auditEvent(x), auditEvent(y)]),
      ]).flat(),
    )
  }
  for (const tenant of [x, y]) {
    const rows = await auditRows(a, tenant)
    t.same(rows.map((r) => r.seq), Array.from({ length: requests }, (_, i) => i + 1), 'gapless, one seq per entry')
    t.ok(a.services.audit.stats().batches < requests, `process a grouped its writes (${a.services.audit.stats().batches} batches for ${requests} requests)`)
    const report = (await b.services.audit.verify({ tenantId: tenant })).tenants[0]
    t.match(report, { ok: true, entries: requests, checkpoints: Number })
    t.ok(report!.checkpoints >= 1, 'checkpoints written along the way')
  }
})

// Two writers (a second audit log on the same store: another process, as far as the chain is
// concerned) appending single-tenant batches to one chain. Each seals on the head it last
// wrote and stores with one conditional statement; when the other moved the head, the statement
// changes nothing and the locking transaction appends instead. Runs on both backends.
t.test('two writers on one chain: a batch sealed on a stale head is never stored as it was', async (t) => {
  const a = await startTestApp(t, { SVC_AUDIT_CHECKPOINT_EVERY: '40' })
  const second = auditLogWithClock(a, () => new Date(), { checkpointEvery: 40 })
  t.teardown(() => second.close())
  const tenant = randomUUID()
  const rounds = 25
  for (let round = 0; round < rounds; round++) {
    await Promise.all([
      a.services.audit.record([auditEvent(tenant), auditEvent(tenant)]),
      second.record([auditEvent(tenant)]),
      a.services.audit.record([auditEvent(tenant)]),
      second.record([auditEvent(tenant), auditEvent(tenant)]),
    ])
  }
  const rows = await auditRows(a, tenant)
  t.same(rows.map((r) => r.seq), Array.from({ length: rounds * 6 }, (_, i) => i + 1), 'gapless, one seq per entry')
  t.match((await second.verify({ tenantId: tenant })).tenants[0], { ok: true, entries: rounds * 6 })
})
