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
