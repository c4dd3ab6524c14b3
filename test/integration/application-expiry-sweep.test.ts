import { randomBytes, randomUUID } from 'node:crypto'
import t from 'tap'
import type { Knex } from 'knex'
import { startTestApp } from '../helpers/app.js'
import { testClock } from '../helpers/clock.js'
import { application, appKey, createToken } from '../helpers/tokens.js'

// The Applications' expiry sweep reclaims rows in a few statements, however many Applications
// and sessions expired, and sends no invalidation: an expired Application's key, and the keys of
// the sessions it authorized, are refused from the instant it expires whether cached or not.

interface Statement {
  sql: string
  bindings: Knex.RawBinding[]
}

/** The statements `run` sends. */
async function statementsOf(knex: Knex, run: () => Promise<unknown>): Promise<Statement[]> {
  const sent: Statement[] = []
  const record = ({ sql, bindings }: Statement) => void sent.push({ sql, bindings })
  knex.on('query', record)
  try {
    await run()
  } finally {
    knex.off('query', record)
  }
  return sent
}

t.test('expired Applications and their sessions: refused while cached, swept in a few statements, with no invalidation', async (t) => {
  const clock = testClock()
  const app = await startTestApp(t, {}, { clock })
  const knex = app.services.store.db.knex
  const tokenId = await createToken(app, await appKey(app, { type: 'private', permissions: ['token:create'] }), { type: 'token', data: 'x' })
  const publicKey = await appKey(app, { type: 'public', permissions: ['token:create'] })
  const read = async (key: string) => (await app.request('GET', `/tokens/${tokenId}`, { key })).status

  const EXPIRING = 4
  const soon = new Date(clock() + 60_000).toISOString()
  const expiring: { key: string; sessionKey: string }[] = []
  for (let i = 0; i < EXPIRING; i++) {
    const authorizer = await application(app, { type: 'private', permissions: ['token:read'], expires_at: soon })
    const session = await app.request('POST', '/sessions', { key: publicKey })
    const authorized = await app.request('POST', '/sessions/authorize', { key: authorizer.key, body: { nonce: session.body.nonce, permissions: ['token:read'] } })
    t.equal(authorized.status, 200)
    t.equal(authorized.body.expires_at, soon, 'the session ends with its authorizer')
    // A row that outlives its authorizer (as none is written now): only the authorizer's expiry,
    // carried by the session's principal, refuses it, and the Applications sweep reclaims it.
    if (i === 0) await knex('sessions').where({ authorized_by: authorizer.id }).update({ expires_at: new Date(clock() + 3_600_000) })
    expiring.push({ key: authorizer.key, sessionKey: session.body.session_key as string })
  }
  const lasting = await appKey(app, { type: 'private', permissions: ['token:read'] })
  for (const { key, sessionKey } of expiring) {
    t.equal(await read(key), 200, 'the Application reads until it expires (its principal is now cached)')
    t.equal(await read(sessionKey), 200, 'and so does its session')
  }

  const invalidated: string[] = []
  app.services.authenticator.onInvalidate((keyHash) => invalidated.push(keyHash))
  clock.advance(61_000)
  for (const { key, sessionKey } of expiring) {
    t.equal(await read(key), 401, 'an expired Application is refused at once, cached')
    t.equal(await read(sessionKey), 401, 'and so is the session it authorized, the one that outlives it too')
  }

  clock.advance(10 * 60_000)
  const sessionsBefore = Number((await knex('sessions').count({ n: '*' }).first())!.n)
  let swept = 0
  const sent = await statementsOf(knex, async () => (swept = await app.services.applications.sweepExpired()))
  t.equal(swept, EXPIRING, 'the expired Applications are deleted')
  t.equal(sent.filter(({ sql }) => sql.startsWith('delete from "sessions"')).length, 2, 'their sessions go in two statements (by creator, by authorizer), not one per Application')
  t.equal(sent.filter(({ sql }) => sql.startsWith('delete from "applications"')).length, 1, 'the Applications in one')
  t.equal(Number((await knex('sessions').count({ n: '*' }).first())!.n), sessionsBefore - 1, 'the session that outlived its authorizer is deleted with it')
  t.equal(await app.services.sessions.sweepExpired(), EXPIRING - 1, 'those that ended with it are the sessions sweep\'s, as any expired session')
  t.same(invalidated, [], 'no key is invalidated')
  for (const { key, sessionKey } of expiring) {
    t.equal(await read(key), 401, 'a swept Application stays refused')
    t.equal(await read(sessionKey), 401, 'and so does its session')
  }
  t.equal(await read(lasting), 200, 'an Application with no expiry stays')
})

t.test('ending the sessions of a key goes by an index, not through every tenant\'s sessions', async (t) => {
  const app = await startTestApp(t)
  const knex = app.services.store.db.knex
  const tenantId = ((await knex('tenants').first('id')) as { id: string }).id
  // Many sessions of the one tenant, each authorized with its own keys, so the tenant's indexes narrow nothing.
  const hash = () => randomBytes(32).toString('hex')
  const now = new Date()
  const session = () => ({ id: randomUUID(), tenant_id: tenantId, key_hash: hash(), nonce_hash: hash(), created_by: randomUUID(), created_by_key_hash: hash(), authorized_by: randomUUID(), authorized_by_key_hash: hash(), authorized_at: now, created_at: now, expires_at: new Date(now.getTime() + 60_000) })
  await knex('sessions').insert(Array.from({ length: 2000 }, session))
  await knex.raw('analyze sessions')
  const sent = await statementsOf(knex, () => app.services.store.sessions.deleteOfKey(tenantId, hash()))
  t.equal(sent.length, 1, 'one statement')
  const { sql, bindings } = sent[0]!
  const plan = await knex.transaction(async (trx) => {
    // With sequential scans off, a plan that still scans tells that no index fits the predicate.
    await trx.raw('set local enable_seqscan = off')
    const explained = (await trx.raw(`explain ${sql.replace(/\$\d+/g, '?')}`, bindings)) as { rows: Record<string, string>[] }
    return explained.rows.map((row) => Object.values(row).join('')).join('\n')
  })
  t.notMatch(plan, /Seq Scan/, 'no sequential scan')
  t.match(plan, /sessions_created_by_key_hash/, 'by the key that created the session')
  t.match(plan, /sessions_authorized_by_key_hash/, 'and by the key that authorized it')
})
