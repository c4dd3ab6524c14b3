import t from 'tap'
import { startTestApp } from '../helpers/app.js'
import { testClock } from '../helpers/clock.js'
import { appKey, VISA } from '../helpers/tokens.js'

t.test('session lifecycle', async (t) => {
  const clock = testClock()
  const app = await startTestApp(t, {}, { clock })
  const publicKey = await appKey(app, { type: 'public', rules: [{ priority: 1, container: '/pci/', transform: 'redact', permissions: ['token:create'] }] })
  const privateKey = await appKey(app, {
    type: 'private',
    rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:create', 'token:read'] }],
  })
  const writer = await appKey(app, { type: 'private', permissions: ['token:create'] })
  const mine = await app.request('POST', '/tokens', { key: writer, body: { id: 'session-card-1', type: 'card_number', data: VISA } })
  const other = await app.request('POST', '/tokens', { key: writer, body: { id: 'other-card-2', type: 'card_number', data: VISA } })
  t.equal(mine.status, 201)
  t.equal(other.status, 201)

  t.equal((await app.request('POST', '/sessions', { key: privateKey })).status, 403, 'only public keys create sessions')
  const session = await app.request('POST', '/sessions', { key: publicKey })
  t.equal(session.status, 201)
  t.match(session.body, { session_key: /^tsr_sess_/, nonce: /^nonce_/, expires_at: String })
  const lifetime = new Date(session.body.expires_at).getTime() - Date.now()
  t.ok(lifetime > 170_000 && lifetime <= 180_000, 'default lifetime is 3 minutes')

  const sessionKey = session.body.session_key
  t.equal((await app.request('GET', `/tokens/${mine.body.id}`, { key: sessionKey })).status, 403, 'nothing before authorization')

  const grant = {
    nonce: session.body.nonce,
    rules: [{ priority: 1, conditions: [{ attribute: 'id', operator: 'starts_with', value: 'session-' }], transform: 'reveal', permissions: ['token:read'] }],
  }
  t.equal((await app.request('POST', '/sessions/authorize', { key: publicKey, body: grant })).status, 403, 'only private keys authorize')
  const overreach = await app.request('POST', '/sessions/authorize', {
    key: privateKey,
    body: { ...grant, rules: [{ ...grant.rules[0], permissions: ['token:delete'] }] },
  })
  t.equal(overreach.status, 403, 'cannot grant what it does not hold')
  const badRule = await app.request('POST', '/sessions/authorize', { key: privateKey, body: { ...grant, rules: [{ priority: 1, transform: 'reveal', permissions: ['token:read'] }] } })
  t.equal(badRule.status, 400)
  const authorized = await app.request('POST', '/sessions/authorize', { key: privateKey, body: grant })
  t.equal(authorized.status, 200)

  const read = await app.request('GET', `/tokens/${mine.body.id}`, { key: sessionKey })
  t.equal(read.status, 200)
  t.equal(read.body.data, VISA, 'the condition matches and reveals')
  t.equal((await app.request('GET', `/tokens/${other.body.id}`, { key: sessionKey })).status, 403, 'the condition does not match')
  t.equal((await app.request('POST', '/sessions/authorize', { key: privateKey, body: grant })).status, 404, 'a nonce authorizes once')
  t.equal((await app.request('POST', '/sessions/authorize', { key: privateKey, body: { ...grant, nonce: 'nonce_unknown' } })).status, 404)

  const short = await app.request('POST', '/sessions', { key: publicKey })
  const until = new Date(clock() + 60_000).toISOString()
  await app.request('POST', '/sessions/authorize', { key: privateKey, body: { nonce: short.body.nonce, permissions: ['token:read'], expires_at: until } })
  t.equal((await app.request('GET', `/tokens/${mine.body.id}`, { key: short.body.session_key })).status, 200)
  clock.advance(59_000)
  t.equal((await app.request('GET', `/tokens/${mine.body.id}`, { key: short.body.session_key })).status, 200, 'until the instant it expires')
  clock.advance(1_000)
  t.equal((await app.request('GET', `/tokens/${mine.body.id}`, { key: short.body.session_key })).status, 401, 'an expired session is refused at once')
  clock.advance(10 * 60_000)
  // The sweep reclaims rows only: an expired session is refused by its expiry, cached or not,
  // so no invalidation (a NOTIFY per key, or every key after a busy day) goes out for it.
  const invalidated: string[] = []
  app.services.authenticator.onInvalidate((keyHash) => invalidated.push(keyHash))
  t.equal(await app.services.sessions.sweepExpired(), 2, 'the sweep removes expired sessions')
  t.same(invalidated, [], 'and invalidates no key')
  t.equal((await app.request('GET', `/tokens/${mine.body.id}`, { key: short.body.session_key })).status, 401, 'a swept session stays refused')
})

t.test('a session authorized by an Application that expires sooner says when it really ends', async (t) => {
  const app = await startTestApp(t)
  const publicKey = await appKey(app, { type: 'public', rules: [{ priority: 1, container: '/pci/', transform: 'redact', permissions: ['token:create'] }] })
  const soon = new Date(Date.now() + 60_000)
  const authorizer = await appKey(app, { type: 'private', permissions: ['token:read'], expires_at: soon.toISOString() })
  const session = await app.request('POST', '/sessions', { key: publicKey })
  const asked = new Date(Date.now() + 3_600_000).toISOString()
  const res = await app.request('POST', '/sessions/authorize', { key: authorizer, body: { nonce: session.body.nonce, permissions: ['token:read'], expires_at: asked } })
  t.equal(res.status, 200)
  t.equal(res.body.expires_at, soon.toISOString(), 'the authorizer\'s expiry, not the hour asked for')
})
