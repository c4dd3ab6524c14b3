import t from 'tap'
import { startTestApp } from '../helpers/app.js'
import { application, appKey, createToken, VISA } from '../helpers/tokens.js'

/**
 * An Application change lists the sessions to end or invalidate under its row lock; a session
 * authorization locks its authorizer's (and creator's) row too, so it is either in that list or
 * judged against the change. Without the lock, a grant committed between the change's list and
 * its commit, looked up meanwhile, stayed cached with the authorizer's old grants (a revealed
 * card for up to 30 s after the narrowing, or after the authorizer's deletion).
 */
// Postgres: the embedded database runs one transaction at a time, so the race cannot happen there.
const skip = process.env.DATABASE_URL ? false : 'needs DATABASE_URL (concurrent transactions)'

t.test('a session authorized while its authorizer is narrowed does not keep the old grants', { skip }, async (t) => {
  const app = await startTestApp(t)
  const reveal = [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:read'] }]
  const writer = await appKey(app, { type: 'private', rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:create'] }] })
  const token = await createToken(app, writer, { type: 'card_number', data: VISA })
  const authorizer = await application(app, { type: 'private', rules: reveal })
  const creator = await appKey(app, { type: 'public', permissions: ['token:create'] })
  const created = await app.request('POST', '/sessions', { key: creator })

  // The narrowing waits, after listing the authorizer's sessions, until the test lets it commit.
  const sessions = app.services.store.sessions
  const keyHashesOf = sessions.keyHashesOf
  let listed!: () => void
  const listing = new Promise<void>((resolve) => (listed = resolve))
  let release!: () => void
  const gate = new Promise<void>((resolve) => (release = resolve))
  sessions.keyHashesOf = async (...args) => {
    const hashes = await keyHashesOf(...args)
    listed()
    await gate
    return hashes
  }
  t.teardown(() => void (sessions.keyHashesOf = keyHashesOf))
  const narrowing = app.request('PUT', `/applications/${authorizer.id}`, { body: { name: 'test app', rules: [{ ...reveal[0], transform: 'mask' }] } })
  await listing
  const authorizing = app.request('POST', '/sessions/authorize', { key: authorizer.key, body: { nonce: created.body.nonce, rules: [{ priority: 1, conditions: [{ attribute: 'container', operator: 'starts_with', value: '/' }], transform: 'reveal', permissions: ['token:read'] }] } })
  await new Promise((resolve) => setTimeout(resolve, 200))
  // Looked up (and cached) while both are under way.
  await app.request('GET', `/tokens/${token}`, { key: created.body.session_key })
  release()
  t.equal((await narrowing).status, 200)
  const authorized = await authorizing
  t.equal(authorized.status, 403, authorized.text + ' judged against the narrowed grants: reveal is no longer the authorizer\'s to hand on')
  const read = await app.request('GET', `/tokens/${token}`, { key: created.body.session_key })
  t.not(read.body?.data, VISA, 'the session never reveals the card')
})

t.test('the authorization reads its locked rows in its own transaction: an extra key authorizes, on one connection too', async (t) => {
  const app = await startTestApp(t)
  const authorizer = await application(app, { type: 'private', permissions: ['token:read'] })
  const extra = await app.request('POST', `/applications/${authorizer.id}/keys`)
  t.equal(extra.status, 201, extra.text)
  const creator = await appKey(app, { type: 'public', permissions: ['token:create'] })
  const created = await app.request('POST', '/sessions', { key: creator })
  const res = await app.request('POST', '/sessions/authorize', { key: extra.body.key, body: { nonce: created.body.nonce, permissions: ['token:read'] } })
  t.equal(res.status, 200, res.text)
})

t.test('a pending session whose creator was deleted or re-keyed is not authorized', async (t) => {
  const app = await startTestApp(t)
  const authorizer = await appKey(app, { type: 'private', permissions: ['token:read'] })
  for (const change of ['DELETE', 'regenerate'] as const) {
    const creator = await application(app, { type: 'public', permissions: ['token:create'] })
    const created = await app.request('POST', '/sessions', { key: creator.key })
    const done = change === 'DELETE' ? await app.request('DELETE', `/applications/${creator.id}`) : await app.request('POST', `/applications/${creator.id}/regenerate`)
    t.ok(done.status < 300, done.text)
    const res = await app.request('POST', '/sessions/authorize', { key: authorizer, body: { nonce: created.body.nonce, permissions: ['token:read'] } })
    t.equal(res.status, 404, `${change}: ${res.text}`)
  }
})
