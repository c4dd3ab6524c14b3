import t from 'tap'
import { startTestApp } from '../helpers/app.js'
import { appKey, card, createToken } from '../helpers/tokens.js'

t.test('an update by a key that may not read the token answers its name only', async (t) => {
  const app = await startTestApp(t)
  const owner = await appKey(app, { type: 'private', permissions: ['token:create', 'token:read', 'token:update'] })
  const writeOnly = await appKey(app, { type: 'public', rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:create', 'token:update'] }] })
  const id = await createToken(app, owner, { id: 'cvc-order-77', type: 'card', data: card(), metadata: { customer: 'alice@example.com' }, search_indexes: ['{{ data.number | last4 }}'] })
  const patch = (key: string, body: unknown) => app.request('PATCH', `/tokens/${id}`, { key, body, headers: { 'content-type': 'application/merge-patch+json' } })
  const blind = await patch(writeOnly, { metadata: { note: 'x' } })
  t.equal(blind.status, 200)
  t.same(Object.keys(blind.body).sort(), ['id', 'modified_at', 'tenant_id', 'type'], 'no metadata, containers, mask or settings the token already had')
  t.notMatch(blind.text, /alice/)
  const seen = await patch(owner, { metadata: { note: 'y' } })
  t.same(seen.body.metadata, { customer: 'alice@example.com', note: 'y' }, 'a reader gets the whole token, the write-only key changed it')
  t.match(seen.body.data, { number: /4242$/ })
})

t.test("nor does it learn the token's views by guessing them or by their render errors", async (t) => {
  const app = await startTestApp(t)
  const owner = await appKey(app, { type: 'private', permissions: ['token:create', 'token:read', 'token:update'] })
  const writeOnly = await appKey(app, { type: 'public', rules: [{ priority: 1, container: '/', transform: 'mask', permissions: ['token:create', 'token:update'] }] })
  const id = await createToken(app, owner, { type: 'token', data: { ssn: '078-05-1120', note: 'x' }, search_indexes: ['{{ data.ssn | last4 }}'], fingerprint_expression: '{{ data.ssn }}' })
  const patch = (body: unknown) => app.request('PATCH', `/tokens/${id}`, { key: writeOnly, body, headers: { 'content-type': 'application/merge-patch+json' } })
  for (const body of [{ search_indexes: ['{{ data.ssn | last4 }}'] }, { search_indexes: ['{{ data.email }}'] }, { fingerprint_expression: '{{ data.ssn }}' }, { fingerprint_expression: '{{ data }}' }]) {
    t.equal((await patch(body)).status, 403, `${JSON.stringify(body)}: right and wrong guesses answer alike`)
  }
  const broken = await patch({ data: { ssn: { a: 1 } } })
  t.equal(broken.status, 400)
  t.notMatch(broken.text, /search_indexes|last4|position/, 'which stored expression failed, and how, is not named')
})

