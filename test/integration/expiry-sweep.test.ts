import { randomBytes, randomUUID } from 'node:crypto'
import t from 'tap'
import type { Knex } from 'knex'
import { startTestApp } from '../helpers/app.js'
import { testClock } from '../helpers/clock.js'
import { appKey } from '../helpers/tokens.js'

// The expiry sweep deletes a backlog in bounded statements (a batch of rows each, until one comes
// back short), not in one statement that a backlog of millions runs past the statement time-out.

const BATCH = 4
const EXPIRED = 2 * BATCH + 1

/** Runs `sweep` and returns the DELETE statements it sent to `table`. */
async function deletesOf(knex: Knex, table: string, sweep: () => Promise<unknown>): Promise<number> {
  let deletes = 0
  const count = ({ sql }: { sql: string }) => void (sql.startsWith(`delete from "${table}"`) && deletes++)
  knex.on('query', count)
  try {
    await sweep()
  } finally {
    knex.off('query', count)
  }
  return deletes
}

t.test('the sweep deletes expired rows in batches and leaves live ones', async (t) => {
  const clock = testClock()
  const app = await startTestApp(t, {}, { clock })
  const { store } = app.services
  const knex = store.db.knex
  const rows = async (table: string) => Number((await knex(table).count({ n: '*' }).first())!.n)
  const soon = new Date(clock() + 60_000).toISOString()
  const later = new Date(clock() + 3_600_000).toISOString()
  const tenantId = ((await knex('tenants').first('id')) as { id: string }).id

  const key = await appKey(app, { type: 'private', permissions: ['token:create', 'token:read'] })
  const tokens = (n: number, expires_at?: string) => Array.from({ length: n }, (_, i) => ({ type: 'token', data: `v${i}`, ...(expires_at && { expires_at }) }))
  const tokenized = await app.request('POST', '/tokenize', { key, body: [...tokens(EXPIRED, soon), ...tokens(2, later), ...tokens(2)] })
  t.equal(tokenized.status, 200)
  for (let i = 0; i < EXPIRED; i++) {
    const res = await app.request('POST', '/applications', { body: { name: `temp ${i}`, type: 'private', permissions: ['token:read'], expires_at: soon } })
    t.equal(res.status, 201)
  }
  const session = (expires_at: string) => ({
    id: randomUUID(),
    tenant_id: tenantId,
    key_hash: randomBytes(32).toString('hex'),
    nonce_hash: randomBytes(32).toString('hex'),
    created_by: randomUUID(),
    created_at: new Date(clock()),
    expires_at: new Date(expires_at),
  })
  await knex('sessions').insert([...Array.from({ length: EXPIRED }, () => session(soon)), session(later)])
  // Idempotency keys expire by the database's clock.
  const claim = (expires_at: string) => ({ tenant_id: tenantId, key: randomUUID(), fingerprint: 'f'.repeat(64), owner: randomUUID(), lease_until: new Date(expires_at), expires_at: new Date(expires_at) })
  await knex('idempotency_keys').insert([...Array.from({ length: EXPIRED }, () => claim('2000-01-01T00:00:00Z')), claim('2100-01-01T00:00:00Z')])
  const before = { tokens: await rows('tokens'), applications: await rows('applications'), sessions: await rows('sessions'), idempotency_keys: await rows('idempotency_keys') }

  clock.advance(61_000)
  const now = new Date(clock())
  const sweeps = {
    tokens: () => store.tokens.deleteExpired(now, BATCH),
    applications: () => store.applications.deleteExpired(now, BATCH),
    sessions: () => store.sessions.deleteExpired(now, BATCH),
    idempotency_keys: () => store.idempotency.deleteExpired(BATCH),
  }
  for (const [table, sweep] of Object.entries(sweeps)) {
    let deleted = 0
    t.equal(await deletesOf(knex, table, async () => (deleted = await sweep())), 3, `${table}: ${EXPIRED} rows in batches of ${BATCH} are three statements`)
    t.equal(deleted, EXPIRED, `${table}: each expired row deleted and told`)
    t.equal(await rows(table), before[table as keyof typeof before] - EXPIRED, `${table}: the live rows stay`)
    t.equal(await deletesOf(knex, table, sweep), 1, `${table}: nothing left, one short statement`)
  }
  for (const { id } of tokenized.body.slice(EXPIRED) as { id: string }[]) t.equal((await app.request('GET', `/tokens/${id}`, { key })).status, 200, 'a live token is still there')
})

t.test('the sweep leaves what expired less than ten minutes ago: a clock that jumps ahead for a while deletes nothing alive', async (t) => {
  const clock = testClock()
  const app = await startTestApp(t, { SVC_EXPIRY_SWEEP_SECONDS: '1' }, { clock })
  const key = await appKey(app, { type: 'private', permissions: ['token:create', 'token:read'] })
  const created = await app.request('POST', '/tokens', { key, body: { type: 'token', data: 'x', expires_at: new Date(clock() + 60_000).toISOString() } })
  t.equal(created.status, 201)
  const stored = () => app.services.store.db.knex('tokens').where({ id: created.body.id }).first()
  clock.advance(5 * 60_000)
  await new Promise((resolve) => setTimeout(resolve, 2_500))
  t.ok(await stored(), 'five minutes ahead: the row is kept (reads already refuse it)')
  clock.advance(-5 * 60_000)
  t.equal((await app.request('GET', `/tokens/${created.body.id}`, { key })).status, 200, 'and once the clock is back the token is there')
  clock.advance(11 * 60_000)
  await new Promise((resolve) => setTimeout(resolve, 2_500))
  t.notOk(await stored(), 'ten minutes past its expiry it is reclaimed')
})
