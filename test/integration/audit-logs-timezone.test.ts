import t from 'tap'
import { startTestApp } from '../helpers/app.js'
import { auditRows, defaultTenant, tamper } from '../helpers/audit.js'

// A zone whose offset before 1900 had seconds (local mean time, +05:53:28). pg wrote Dates in
// the process's zone with that offset rounded to the minute, so on Postgres a log cursor before
// 1900 named its own entry again and paging repeated it forever. Node reads TZ when it changes.
process.env.TZ = 'Asia/Kolkata'

const app = await startTestApp(t)

// PGlite's driver writes Dates with toISOString and never had the fault: this is pg's.
t.test('GET /logs pages through entries before 1900 whatever the process\'s time zone', { skip: process.env.DATABASE_URL ? false : 'the pg driver only' }, async (t) => {
  const tenant = await defaultTenant(app)
  for (let i = 0; i < 4; i++) t.equal((await app.request('POST', '/applications', { body: { name: `tz ${i}`, type: 'private', permissions: ['token:read'] } })).status, 201)
  const created = (await auditRows(app, tenant)).filter((r) => r.action === 'application.create').slice(-4)
  // Times the table allows (years 1 to 9999), set as its owner could.
  const times = ['1500-01-01T00:00:00Z', '1500-01-01T00:00:10Z', '1500-01-01T00:00:20Z', '1500-01-01T00:00:40Z']
  await tamper(app, async (knex) => {
    for (const [i, row] of created.entries()) await knex('audit_events').where({ id: row.id }).update({ occurred_at: times[i] })
  })

  const seen: number[] = []
  let cursor: string | undefined
  for (let page = 0; page < 8; page++) {
    const res = await app.request('GET', `/logs?size=1&to=1600-01-01T00:00:00Z${cursor ? `&cursor=${cursor}` : ''}`)
    t.equal(res.status, 200, res.text)
    seen.push(...res.body.data.map((e: { seq: number }) => e.seq))
    cursor = res.body.pagination.next_cursor
    if (!cursor) break
  }
  t.same(seen, created.map((r) => Number(r.seq)).reverse(), 'each entry once, newest first, and the listing ends')
})
