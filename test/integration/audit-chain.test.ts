import { randomBytes, randomUUID } from 'node:crypto'
import t from 'tap'
import { auditKeyring } from '../../src/audit/audit-keys.js'
import { verifyAuditChain } from '../../src/audit/verify.js'
import type { AuditLog } from '../../src/audit/audit-log.js'
import { startTestApp } from '../helpers/app.js'
import { auditEvent, auditLogWithClock, auditRows, defaultTenant, tamper } from '../helpers/audit.js'

const DAY = 24 * 60 * 60 * 1000

// One app for the file; each test writes to a tenant chain of its own.
const app = await startTestApp(t)

/** A fresh tenant chain with `count` entries (one per record call, so one per seq). */
async function chainWith(count: number, audit: AuditLog = app.services.audit): Promise<string> {
  const tenant = randomUUID()
  for (let i = 0; i < count; i++) await audit.record([auditEvent(tenant)])
  return tenant
}

async function firstBreak(tenant: string) {
  const result = await app.services.audit.verify({ tenantId: tenant })
  return result.tenants[0]?.break
}

t.test('an intact chain verifies, entry by entry, with seq 1..n and checkpoints', async (t) => {
  const audit = auditLogWithClock(app, () => new Date(), { checkpointEvery: 3 })
  t.teardown(() => audit.close())
  const tenant = await chainWith(7, audit)
  const result = await app.services.audit.verify()
  t.ok(result.ok, 'ok')
  const report = result.tenants.find((r) => r.tenantId === tenant)
  t.match(report, { ok: true, entries: 7, firstSeq: 1, lastSeq: 7, checkpoints: 2, anchorSeq: null })
  t.same((await auditRows(app, tenant)).map((r) => r.seq), [1, 2, 3, 4, 5, 6, 7])
})

t.test('a batch retried after its answer was lost is not appended twice: entries already stored are left out', async (t) => {
  const tenant = randomUUID()
  const first = auditEvent(tenant, { id: randomUUID() })
  await app.services.audit.record([first])
  // Another writer (no cached head: the locking path) gets the same entry again, as a retry of
  // a batch whose commit went through unheard would, together with a new one.
  const retry = auditLogWithClock(app, () => new Date())
  t.teardown(() => retry.close())
  const next = auditEvent(tenant, { id: randomUUID() })
  await retry.record([first, next])
  t.same((await auditRows(app, tenant)).map((r) => [r.seq, r.id]), [[1, first.id], [2, next.id]], 'each entry once, in order')
  t.match(await app.services.audit.verify({ tenantId: tenant }), { ok: true })
})

t.test('the four ways of breaking the chain are each found at the first broken link', async (t) => {
  t.test('altered', async (t) => {
    const tenant = await chainWith(6)
    await tamper(app, (k) => k('audit_events').where({ tenant_id: tenant, seq: 4 }).update({ outcome: 'denied' }))
    t.match(await firstBreak(tenant), { seq: 4, reason: 'altered' })
  })

  t.test('altered without changing any visible field (the time, by a millisecond)', async (t) => {
    const tenant = await chainWith(3)
    await tamper(app, (k) => k.raw("update audit_events set occurred_at = occurred_at + interval '1 millisecond' where tenant_id = ? and seq = 2", [tenant]))
    t.match(await firstBreak(tenant), { seq: 2, reason: 'altered' })
  })

  t.test('altered below a millisecond (a Date read back would not show it)', async (t) => {
    const tenant = await chainWith(3)
    await tamper(app, (k) => k.raw("update audit_events set occurred_at = occurred_at + interval '1 microsecond' where tenant_id = ? and seq = 2", [tenant]))
    t.match(await firstBreak(tenant), { seq: 2, reason: 'altered' })
  })

  t.test('a hash rewritten in upper case is the entry that changed', async (t) => {
    const tenant = await chainWith(3)
    await tamper(app, (k) => k.raw('update audit_events set hash = upper(hash) where tenant_id = ? and seq = 2', [tenant]))
    t.match(await firstBreak(tenant), { seq: 2, reason: 'altered' })
  })

  t.test('deleted', async (t) => {
    const tenant = await chainWith(6)
    await tamper(app, (k) => k('audit_events').where({ tenant_id: tenant, seq: 3 }).delete())
    t.match(await firstBreak(tenant), { seq: 3, reason: 'missing' })
  })

  t.test('reordered', async (t) => {
    const tenant = await chainWith(6)
    await tamper(app, async (k) => {
      await k('audit_events').where({ tenant_id: tenant, seq: 3 }).update({ seq: -3 })
      await k('audit_events').where({ tenant_id: tenant, seq: 4 }).update({ seq: 3 })
      await k('audit_events').where({ tenant_id: tenant, seq: -3 }).update({ seq: 4 })
    })
    t.match(await firstBreak(tenant), { seq: 3, reason: 'altered' })
  })

  t.test('inserted in the middle (later entries renumbered)', async (t) => {
    const tenant = await chainWith(6)
    const [copy] = await auditRows(app, tenant)
    await tamper(app, async (k) => {
      await k.raw('update audit_events set seq = seq + 1000 where tenant_id = ? and seq >= 4', [tenant])
      await k.raw('update audit_events set seq = seq - 999 where tenant_id = ? and seq >= 1000', [tenant])
      await k('audit_events').insert({ ...copy, seq: 4, id: randomUUID(), target_ids: JSON.stringify(copy!.target_ids), token_ids: '[]', hash: randomBytes(32).toString('hex') })
      await k('audit_chain_heads').where({ tenant_id: tenant }).update({ seq: 7 })
    })
    t.match(await firstBreak(tenant), { seq: 4, reason: 'altered' })
  })

  t.test('inserted at the end', async (t) => {
    const tenant = await chainWith(3)
    const [copy] = await auditRows(app, tenant)
    await tamper(app, (k) => k('audit_events').insert({ ...copy, seq: 4, id: randomUUID(), target_ids: JSON.stringify(copy!.target_ids), token_ids: '[]' }))
    t.match(await firstBreak(tenant), { seq: 4, reason: 'unexpected' })
  })

  t.test('inserted before the start (seq 0 or below, even below -2^53)', async (t) => {
    for (const seq of ['0', '-5', '-9007199254740993']) {
      const tenant = await chainWith(3)
      const [copy] = await auditRows(app, tenant)
      await tamper(app, (k) => k('audit_events').insert({ ...copy, seq, id: randomUUID(), target_ids: JSON.stringify(copy!.target_ids), token_ids: '[]', hash: randomBytes(32).toString('hex') }))
      t.match(await firstBreak(tenant), { seq: Number(seq), reason: 'unexpected' }, `seq ${seq}`)
    }
  })

  t.test('the last entries removed', async (t) => {
    const tenant = await chainWith(5)
    await tamper(app, (k) => k('audit_events').where({ tenant_id: tenant }).where('seq', '>=', 4).delete())
    t.match(await firstBreak(tenant), { seq: 4, reason: 'missing' })
  })

  t.test('the first entries removed without retention', async (t) => {
    const tenant = await chainWith(5)
    await tamper(app, (k) => k('audit_events').where({ tenant_id: tenant }).where('seq', '<=', 2).delete())
    t.match(await firstBreak(tenant), { seq: 1, reason: 'missing' })
  })

  t.test('a checkpoint altered', async (t) => {
    const audit = auditLogWithClock(app, () => new Date(), { checkpointEvery: 2 })
    t.teardown(() => audit.close())
    const tenant = await chainWith(4, audit)
    await tamper(app, (k) => k('audit_checkpoints').where({ tenant_id: tenant, seq: 2 }).update({ seq: 3 }))
    t.match(await firstBreak(tenant), { seq: 3, reason: 'checkpoint_invalid' })
  })

  t.test('the checkpoints deleted, the head still naming the last', async (t) => {
    const audit = auditLogWithClock(app, () => new Date(), { checkpointEvery: 2 })
    t.teardown(() => audit.close())
    const tenant = await chainWith(5, audit)
    await tamper(app, (k) => k('audit_checkpoints').where({ tenant_id: tenant }).delete())
    t.match(await firstBreak(tenant), { seq: 4, reason: 'missing' })
  })

  t.test('a head naming a checkpoint beyond its last entry', async (t) => {
    const tenant = await chainWith(3)
    await tamper(app, (k) => k('audit_chain_heads').where({ tenant_id: tenant }).update({ checkpoint_seq: 9 }))
    t.match(await firstBreak(tenant), { seq: 3, reason: 'head_mismatch' })
  })
})

t.test('entries and checkpoints are append-only even for the tables owner', async (t) => {
  const audit = auditLogWithClock(app, () => new Date(), { checkpointEvery: 1 })
  t.teardown(() => audit.close())
  const tenant = await chainWith(2, audit)
  const knex = app.services.store.db.knex
  await t.rejects(knex('audit_events').where({ tenant_id: tenant }).update({ status: 500 }), /append-only/)
  await t.rejects(knex('audit_checkpoints').where({ tenant_id: tenant }).update({ hash: 'x' }), /append-only/)
  await t.rejects(knex.raw('truncate audit_events'), /append-only/)
  t.ok((await app.services.audit.verify({ tenantId: tenant })).ok)
})

t.test('retention', async (t) => {
  // Maintenance covers every chain of a database, so retention gets a database of its own.
  const own = await startTestApp(t, { SVC_AUDIT_RETENTION_DAYS: '400' })
  // Its bootstrap tenant's chain (tenant.create, application.create) is checkpointed now, so the
  // counts below are of each test's own chain.
  t.same(await own.services.audit.maintain(), { checkpoints: 1, pruned: 0 })

  t.test('prunes up to a checkpoint older than the period; what remains verifies from it', async (t) => {
    const tenant = randomUUID()
    let now = new Date(Date.now() - 500 * DAY)
    const audit = auditLogWithClock(own, () => now)
    t.teardown(() => audit.close())
    for (let i = 0; i < 5; i++) await audit.record([auditEvent(tenant)])
    t.same(await audit.maintain(now), { checkpoints: 1, pruned: 0 }, 'checkpoint at 5, nothing old enough yet')
    now = new Date(Date.now() - 10 * DAY)
    for (let i = 0; i < 3; i++) await audit.record([auditEvent(tenant)])
    now = new Date()
    t.same(await audit.maintain(now), { checkpoints: 1, pruned: 5 }, 'entries 1..5 pruned; checkpoint 8 written')
    t.same((await auditRows(own, tenant)).map((r) => r.seq), [6, 7, 8])
    t.match((await audit.verify({ tenantId: tenant })).tenants[0], { ok: true, entries: 3, firstSeq: 6, anchorSeq: 5 })
    t.same(await audit.maintain(now), { checkpoints: 0, pruned: 0 }, 'idempotent')

    await audit.record([auditEvent(tenant)])
    t.ok((await audit.verify({ tenantId: tenant })).ok, 'the chain goes on after pruning')

    // Deleting younger entries up to a recent checkpoint looks like pruning, but is caught.
    await tamper(own, async (k) => {
      await k('audit_checkpoints').where({ tenant_id: tenant }).where('seq', '<', 8).delete()
      await k('audit_events').where({ tenant_id: tenant }).where('seq', '<=', 8).delete()
    })
    t.match((await audit.verify({ tenantId: tenant })).tenants[0]?.break, { seq: 8, reason: 'pruned_within_retention' })
  })

  t.test('a checkpoint stamped by a clock that ran behind does not let fresh entries go', async (t) => {
    const tenant = randomUUID()
    const audit = auditLogWithClock(own, () => new Date())
    t.teardown(() => audit.close())
    for (let i = 0; i < 4; i++) await audit.record([auditEvent(tenant)])
    // Another process, its clock 800 days behind, checkpoints the chain now.
    const behind = auditLogWithClock(own, () => new Date(Date.now() - 800 * DAY))
    t.teardown(() => behind.close())
    await behind.maintain(new Date(Date.now() - 800 * DAY))
    t.equal((await audit.maintain(new Date())).pruned, 0, 'entries written today are kept')
    t.same((await auditRows(own, tenant)).map((r) => r.seq), [1, 2, 3, 4])
    t.ok((await audit.verify({ tenantId: tenant })).ok)
  })

  t.test("a process clock far ahead of the database's prunes nothing still within the period", async (t) => {
    const tenant = randomUUID()
    const audit = auditLogWithClock(own, () => new Date())
    t.teardown(() => audit.close())
    for (let i = 0; i < 3; i++) await audit.record([auditEvent(tenant)])
    await audit.maintain(new Date())
    const ahead = new Date(Date.now() + 500 * DAY)
    t.equal((await audit.maintain(ahead)).pruned, 0, 'the earlier clock, the database\'s, decides')
    t.same((await auditRows(own, tenant)).map((r) => r.seq), [1, 2, 3])
  })

  t.test('a chain pruned entirely still verifies against its head', async (t) => {
    const tenant = randomUUID()
    let now = new Date(Date.now() - 450 * DAY)
    const audit = auditLogWithClock(own, () => now)
    t.teardown(() => audit.close())
    for (let i = 0; i < 3; i++) await audit.record([auditEvent(tenant)])
    await audit.maintain(now)
    now = new Date()
    await audit.maintain(now)
    t.same(await auditRows(own, tenant), [], 'every entry pruned')
    t.match((await audit.verify({ tenantId: tenant })).tenants[0], { ok: true, entries: 0, anchorSeq: 3 })
  })
})

t.test('SVC_AUDIT_SECRET set later: old entries verify with the key-hash secret, new ones with the new secret', async (t) => {
  const tenant = await chainWith(2)
  const secret = randomBytes(32).toString('base64url')
  const rotated = auditLogWithClock(app, () => new Date(), { secret })
  t.teardown(() => rotated.close())
  await rotated.record([auditEvent(tenant)])
  const rows = await auditRows(app, tenant)
  t.not(rows[2]!.key_id, rows[0]!.key_id, 'the new entry names the new key')
  t.ok((await rotated.verify({ tenantId: tenant })).ok, 'both keys verify')

  const onlyNew = await verifyAuditChain(app.services.store.audit, auditKeyring(secret, randomBytes(32).toString('hex')), { retentionDays: 400, tenantId: tenant })
  t.match(onlyNew.tenants[0]?.break, { seq: 1, reason: 'unknown_key' }, 'a keyring without the old key names the problem')
  const wrong = await verifyAuditChain(app.services.store.audit, auditKeyring(undefined, app.config.keyHashSecret!), { retentionDays: 400, tenantId: tenant })
  t.match(wrong.tenants[0]?.break, { seq: 3, reason: 'unknown_key' })
})

t.test('events of one request share a batch; tenants have separate chains', async (t) => {
  const tenant = await defaultTenant(app)
  const other = randomUUID()
  await Promise.all([
    app.services.audit.record([auditEvent(tenant), auditEvent(other), auditEvent(tenant)]),
    app.services.audit.record([auditEvent(other)]),
  ])
  // After the bootstrap's own two (tenant.create, application.create).
  t.same((await auditRows(app, tenant)).map((r) => r.seq), [1, 2, 3, 4])
  t.same((await auditRows(app, other)).map((r) => r.seq), [1, 2])
  for (const id of [tenant, other]) t.ok((await app.services.audit.verify({ tenantId: id })).ok, 'chain intact')
})

t.test('a time no Date can hold: refused by the table; with the check dropped by its owner, found by verify and still listed', async (t) => {
  const knex = app.services.store.db.knex
  const times = ['infinity', '280000-01-01T00:00:00Z', '2000-01-01 BC']
  const tenants = [await chainWith(3), await chainWith(3), await chainWith(3)]
  for (const [i, at] of times.entries()) {
    await t.rejects(tamper(app, (k) => k.raw('update audit_events set occurred_at = ? where tenant_id = ? and seq = 2', [at, tenants[i]!])), /audit_events_occurred_at_range/, `${at} refused`)
  }
  const checkpointed = auditLogWithClock(app, () => new Date(), { checkpointEvery: 2 })
  t.teardown(() => checkpointed.close())
  const withCheckpoint = await chainWith(3, checkpointed)
  await t.rejects(tamper(app, (k) => k.raw("update audit_checkpoints set created_at = 'infinity' where tenant_id = ?", [withCheckpoint])), /audit_checkpoints_created_at_range/)

  const tenant = await defaultTenant(app)
  const head = Number((await knex('audit_chain_heads').where({ tenant_id: tenant }).first()).seq)
  const [copy] = await auditRows(app, tenant)
  const forged = (seq: number, at: string) => ({ ...copy, seq, id: randomUUID(), occurred_at: at, target_ids: JSON.stringify(copy!.target_ids), token_ids: '[]', hash: randomBytes(32).toString('hex') })
  await knex.raw('alter table audit_events drop constraint audit_events_occurred_at_range')
  await knex.raw('alter table audit_checkpoints drop constraint audit_checkpoints_created_at_range')
  t.teardown(async () => {
    await knex('audit_events').where({ tenant_id: tenant }).where('seq', '>', head).delete()
    await knex.raw("alter table audit_events add constraint audit_events_occurred_at_range check (occurred_at >= '0001-01-01T00:00:00Z' and occurred_at < '10000-01-01T00:00:00Z') not valid")
    await knex.raw("alter table audit_checkpoints add constraint audit_checkpoints_created_at_range check (created_at >= '0001-01-01T00:00:00Z' and created_at < '10000-01-01T00:00:00Z') not valid")
  })
  for (const [i, at] of times.entries()) {
    await tamper(app, (k) => k.raw('update audit_events set occurred_at = ? where tenant_id = ? and seq = 2', [at, tenants[i]!]))
  }
  await tamper(app, (k) => k.raw("update audit_checkpoints set created_at = 'infinity' where tenant_id = ?", [withCheckpoint]))

  // One verification of every tenant: each forged time is its tenant's break, none stops the rest.
  const result = await app.services.audit.verify()
  t.notOk(result.ok)
  for (const [i, at] of times.entries()) t.match(result.tenants.find((r) => r.tenantId === tenants[i]), { ok: false, break: { seq: 2, reason: 'altered' } }, at)
  t.match(result.tenants.find((r) => r.tenantId === withCheckpoint), { ok: false, break: { seq: 2, reason: 'checkpoint_invalid' } })
  const intact = await chainWith(2)
  t.match((await app.services.audit.verify()).tenants.find((r) => r.tenantId === intact), { ok: true, entries: 2 })

  // GET /logs still answers: such an entry is shown (newest first, infinity leads) and ends the
  // listing where it is the page's last; times before 1970 page on.
  await knex('audit_events').insert([forged(head + 1000, 'infinity'), forged(head + 1001, '1500-01-01T00:00:00Z'), forged(head + 1002, '1400-01-01T00:00:00Z')])
  const first = await app.request('GET', '/logs?size=1')
  t.equal(first.status, 200, first.text)
  t.match(first.body, { data: [{ seq: head + 1000, time: 'infinity' }] })
  t.notOk(first.body.pagination.next_cursor, 'no cursor after an entry with no instant')
  const old = await app.request('GET', '/logs?size=1&to=1600-01-01T00:00:00Z')
  t.match(old.body, { data: [{ seq: head + 1001, time: '1500-01-01T00:00:00.000Z' }] })
  const older = await app.request('GET', `/logs?size=1&to=1600-01-01T00:00:00Z&cursor=${old.body.pagination.next_cursor}`)
  t.equal(older.status, 200, older.text)
  t.match(older.body, { data: [{ seq: head + 1002, time: '1400-01-01T00:00:00.000Z' }] })
  // A year past 9999 is a Date, but no cursor may name it: the page that ends there has none,
  // rather than one the API then refuses as not its own.
  await knex('audit_events').insert([forged(head + 1003, '20000-01-01T00:00:00Z')])
  const far = await app.request('GET', '/logs?size=2')
  t.equal(far.status, 200, far.text)
  t.match(far.body, { data: [{ seq: head + 1000 }, { seq: head + 1003 }] })
  t.notOk(far.body.pagination.next_cursor, 'no cursor after an entry no cursor can name')
})
