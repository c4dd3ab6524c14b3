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
