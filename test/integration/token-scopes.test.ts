/* eslint-disable @typescript-eslint/no-explicit-any -- the test reads arbitrary JSON pages */
import t from 'tap'
import { startTestApp } from '../helpers/app.js'
import { appKey } from '../helpers/tokens.js'

// A caller's rules become one SQL predicate on lists and searches, the first matching rule deciding.

t.test('a session of many conditioned rules: an equality search answers, the first match deciding', async (t) => {
  const app = await startTestApp(t)
  const writer = await appKey(app, { type: 'private', permissions: ['token:create'] })
  const authorizer = await appKey(app, { type: 'private', rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:read', 'token:search'] }] })
  const publicKey = await appKey(app, { type: 'public', permissions: ['token:create'] })
  for (const id of ['tok-1', 'abc-1']) {
    const res = await app.request('POST', '/tokens', { key: writer, body: { id, type: 'token', data: 'x', search_indexes: ['{{ data }}'] } })
    t.equal(res.status, 201)
  }
  // 100 rules of 50 conditions on `tok…`: 50 that redact, then 50 that mask (the probe that found it).
  // Every later rule used to repeat every earlier refusal: more than 65,535 bind parameters (a 503).
  const conditions = Array.from({ length: 50 }, (_, j) => ({ attribute: 'id', operator: 'starts_with', value: j === 0 ? 'tok' : 't' }))
  const rules = Array.from({ length: 100 }, (_, i) => ({ priority: i + 1, transform: i < 50 ? 'redact' : 'mask', permissions: ['token:read', 'token:search'], conditions }))
  const session = await app.request('POST', '/sessions', { key: publicKey })
  const authorized = await app.request('POST', '/sessions/authorize', { key: authorizer, body: { nonce: session.body.nonce, rules } })
  t.equal(authorized.status, 200, authorized.text.slice(0, 500))
  const key = session.body.session_key as string
  const ids = (res: any) => res.body.data.map((d: any) => d.id).sort()
  for (const [method, path, body] of [
    ['POST', '/tokens/search', { query: 'data:x' }],
    ['POST', '/v2/tokens/search', { query: 'data:x' }],
  ] as const) {
    const res = await app.request(method, path, { key, body })
    t.equal(res.status, 200, path)
    t.same(ids(res), [], `${path}: a token the first matching rule redacts is never matched on its data`)
  }
  const listed = await app.request('GET', '/tokens', { key })
  t.same(ids(listed), ['tok-1'], 'the list shows what the rules reach, redacted or not, and nothing else')
})
