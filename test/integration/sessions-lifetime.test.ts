import { randomUUID } from 'node:crypto'
import t from 'tap'
import { startTestApp } from '../helpers/app.js'
import { testClock } from '../helpers/clock.js'
import { application } from '../helpers/tokens.js'

t.test('a session is answered with the end it will have: no later than its creator and its authorizer', async (t) => {
  const clock = testClock()
  const app = await startTestApp(t, { SVC_EXPIRY_SWEEP_SECONDS: '3600' }, { clock })
  const creatorEnds = new Date(clock() + 60_000).toISOString()
  const publicApp = await application(app, { type: 'public', permissions: ['token:create'], expires_at: creatorEnds })
  const authorizer = await application(app, { type: 'private', permissions: ['token:read'] })
  const created = await app.request('POST', '/sessions', { key: publicApp.key })
  t.equal(created.status, 201)
  t.equal(created.body.expires_at, creatorEnds, 'created: ends with its public Application, not 3 minutes on')
  const asked = new Date(clock() + 3_600_000).toISOString()
  const authorized = await app.request('POST', '/sessions/authorize', { key: authorizer.key, body: { nonce: created.body.nonce, permissions: ['token:read'], expires_at: asked } })
  t.equal(authorized.status, 200)
  t.equal(authorized.body.expires_at, creatorEnds, 'authorized: still no later than its creator')
  clock.advance(61_000)
  t.equal((await app.request('GET', '/tokens', { key: created.body.session_key })).status, 401, 'and it ends then')
})

t.test('a nonce that names no session is a 404 before the grant is judged', async (t) => {
  const app = await startTestApp(t)
  const narrow = await application(app, { type: 'private', rules: [{ priority: 1, container: '/orders/', transform: 'mask', permissions: ['token:read'] }] })
  const res = await app.request('POST', '/sessions/authorize', { key: narrow.key, body: { nonce: 'nonce_doesnotexist', rules: [{ priority: 1, transform: 'reveal', permissions: ['token:read'], conditions: [{ attribute: 'container', operator: 'starts_with', value: '/' }] }] } })
  t.equal(res.status, 404, 'the wider grant is not even checked')
})

t.test('pending sessions a public key piles up do not weigh on its Application\'s changes; authorized ones end with a narrowing, however many', async (t) => {
  const app = await startTestApp(t)
  const publicApp = await application(app, { type: 'public', rules: [{ priority: 1, container: '/', transform: 'mask', permissions: ['token:create'] }] })
  const authorizer = await application(app, { type: 'private', permissions: ['token:read'] })
  const knex = app.services.store.db.knex
  const authorized: string[] = []
  for (let i = 0; i < 120; i++) {
    const created = await app.request('POST', '/sessions', { key: publicApp.key })
    t.equal((await app.request('POST', '/sessions/authorize', { key: authorizer.key, body: { nonce: created.body.nonce, permissions: ['token:read'] } })).status, 200)
    authorized.push(created.body.session_key)
  }
  for (const key of [authorized[0]!, authorized.at(-1)!]) t.equal((await app.request('GET', '/tokens', { key })).status, 200, 'cached with its grant')
  // As many pending rows as the rate allows a public key to make (written directly: the statement, not the rate, is the point).
  const template = await knex('sessions').where({ created_by: publicApp.id }).first()
  const pending = Array.from({ length: 20_000 }, (_, i) => ({ ...template, id: randomUUID(), key_hash: `pending-${i}`, nonce_hash: `pending-nonce-${i}`, authorized_at: null, authorized_by: null, authorized_by_key_hash: null, permissions: '[]', rules: '[]' }))
  for (let i = 0; i < pending.length; i += 2_000) await knex('sessions').insert(pending.slice(i, i + 2_000))
  const queries: string[] = []
  const watch = (q: { sql: string }) => queries.push(q.sql)
  knex.on('query', watch)
  const narrowed = await app.request('PUT', `/applications/${publicApp.id}`, { body: { name: 'test app', rules: [{ priority: 1, container: '/narrow/', transform: 'mask', permissions: ['token:create'] }] } })
  knex.off('query', watch)
  t.equal(narrowed.status, 200)
  t.ok(queries.filter((sql) => /"sessions"/.test(sql)).every((sql) => /authorized_at" is not null/.test(sql)), 'only authorized sessions are touched by the change')
  for (const key of [authorized[0]!, authorized.at(-1)!]) t.equal((await app.request('GET', '/tokens', { key })).status, 401, 'every authorized session ended, cached or not')
  t.equal(Number((await knex('sessions').where({ created_by: publicApp.id }).whereNull('authorized_at').count({ n: '*' }).first())!.n), 20_000, 'pending ones are left to their few minutes')
})

t.test('a session still pending when its public creator is narrowed can no longer be authorized; one made after can', async (t) => {
  const app = await startTestApp(t)
  const wide = [{ priority: 1, container: '/', transform: 'mask', permissions: ['token:create'] }]
  const publicApp = await application(app, { type: 'public', rules: wide })
  const authorizer = await application(app, { type: 'private', permissions: ['token:read'] })
  const authorize = (nonce: string) => app.request('POST', '/sessions/authorize', { key: authorizer.key, body: { nonce, permissions: ['token:read'] } })
  const before = await app.request('POST', '/sessions', { key: publicApp.key })
  const renamed = await app.request('PUT', `/applications/${publicApp.id}`, { body: { name: 'renamed', rules: wide } })
  t.equal(renamed.status, 200)
  const keptByRename = await app.request('POST', '/sessions', { key: publicApp.key })
  t.equal((await authorize(keptByRename.body.nonce)).status, 200, 'a change that narrows nothing ends nothing')

  const narrowed = await app.request('PUT', `/applications/${publicApp.id}`, { body: { name: 'renamed', rules: [{ ...wide[0], container: '/narrow/' }] } })
  t.equal(narrowed.status, 200)
  t.notOk('grants_narrowed_at' in narrowed.body, 'not part of the answer')
  const refused = await authorize(before.body.nonce)
  t.equal(refused.status, 404, refused.text)
  t.equal((await app.request('GET', '/tokens', { key: before.body.session_key })).status, 403, 'the session holds nothing')
  const after = await app.request('POST', '/sessions', { key: publicApp.key })
  t.equal((await authorize(after.body.nonce)).status, 200, 'a session the narrowed Application made is authorized as before')
})
