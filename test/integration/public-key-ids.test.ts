import t from 'tap'
import { startTestApp } from '../helpers/app.js'
import { appKey, card } from '../helpers/tokens.js'

// A public key is in a web page, so anyone holds it: the ids of its tenant's tokens are not its to choose.
t.test('public and session keys cannot choose a token id; private keys still can', async (t) => {
  const app = await startTestApp(t)
  const backend = await appKey(app, { type: 'private', rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:create', 'token:read'] }] })
  const page = await appKey(app, { type: 'public', rules: [{ priority: 1, container: '/web/', transform: 'redact', permissions: ['token:create'] }] })
  t.equal((await app.request('POST', '/tokens', { key: backend, body: { id: 'customer-42-card', type: 'card', data: card(), containers: ['/backend/'] } })).status, 201, 'a backend chooses its ids')

  for (const id of ['customer-42-card', 'customer-43-card']) {
    const res = await app.request('POST', '/tokens', { key: page, body: { id, type: 'card', data: card('5555555555554444'), containers: ['/web/'] } })
    t.equal(res.status, 400, `${id}: the same answer whether or not the id exists`)
    t.match(res.body.errors, { id: [/cannot be chosen with a public or session key/] })
  }
  const tokenized = await app.request('POST', '/tokenize', { key: page, body: { a: { id: 'customer-44-card', type: 'card', data: card(), containers: ['/web/'] } } })
  t.equal(tokenized.status, 400)
  t.match(tokenized.body.errors, { 'a.id': [/cannot be chosen/] })

  const made = await app.request('POST', '/tokens', { key: page, body: { type: 'card', data: card(), containers: ['/web/'] } })
  t.equal(made.status, 201)
  t.match(made.body.id, /^[0-9a-f-]{36}$/, 'Tessera chose it')
  const later = await app.request('POST', '/tokens', { key: backend, body: { id: 'customer-43-card', type: 'card', data: card(), containers: ['/backend/'] } })
  t.equal(later.status, 201, 'the id the page tried is still the backend\'s to take')

  const session = await app.request('POST', '/sessions', { key: page })
  const authorizer = await appKey(app, { type: 'private', rules: [{ priority: 1, container: '/web/', transform: 'redact', permissions: ['token:create'] }] })
  const granted = await app.request('POST', '/sessions/authorize', { key: authorizer, body: { nonce: session.body.nonce, rules: [{ priority: 1, transform: 'redact', permissions: ['token:create'], conditions: [{ attribute: 'container', operator: 'starts_with', value: '/web/' }] }] } })
  t.equal(granted.status, 200, granted.text)
  const bySession = await app.request('POST', '/tokens', { key: session.body.session_key, body: { id: 'customer-45-card', type: 'card', data: card(), containers: ['/web/'] } })
  t.equal(bySession.status, 400)
  t.match(bySession.body.errors, { id: [/cannot be chosen/] })
})
