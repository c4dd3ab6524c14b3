import t from 'tap'
import { startTestApp, type TestApp } from '../helpers/app.js'
import { appKey, VISA } from '../helpers/tokens.js'

const json = { 'content-type': 'application/json' }
const post = (app: TestApp, key: string, path: string, raw: string, headers: Record<string, string> = {}) =>
  app.request('POST', path, { key, rawBody: raw, headers: { ...json, ...headers } })

t.test('/tokenize and /detokenize answer any JSON value as JSON, a top-level scalar and null too', async (t) => {
  const app = await startTestApp(t)
  const key = await appKey(app, { type: 'private', rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:create', 'token:read'] }] })

  for (const raw of ['"hello"', '42', 'true', 'null']) {
    const res = await post(app, key, '/tokenize', raw)
    t.equal(res.status, 200, `tokenize ${raw}: 200`)
    t.match(res.headers.get('content-type'), /^application\/json/, `tokenize ${raw}: JSON`)
    const value: unknown = JSON.parse(res.text)
    if (raw === 'null') t.equal(value, null, 'null stays null')
    else {
      t.type(value, 'string', `tokenize ${raw}: a token id as a JSON string`)
      const back = await post(app, key, '/detokenize', JSON.stringify(`{{ ${value as string} }}`))
      t.equal(back.status, 200)
      t.match(back.headers.get('content-type'), /^application\/json/, `detokenize of ${raw}: JSON`)
      t.same(JSON.parse(back.text), JSON.parse(raw), `detokenize gives ${raw} back with its type`)
    }
  }
  const text = await post(app, key, '/detokenize', '"just text"')
  t.equal(text.text, '"just text"', 'a string without expressions comes back as a JSON string')
  const nothing = await post(app, key, '/detokenize', 'null')
  t.equal(nothing.status, 200)
  t.equal(nothing.text, 'null')

  const first = await post(app, key, '/tokenize', '"again"', { 'svc-idempotency-key': 'scalar-1' })
  const replay = await post(app, key, '/tokenize', '"again"', { 'svc-idempotency-key': 'scalar-1' })
  t.equal(replay.status, 200, 'a replayed scalar answer')
  t.equal(replay.headers.get('svc-idempotent-replayed'), 'true')
  t.match(replay.headers.get('content-type'), /^application\/json/)
  t.equal(replay.text, first.text, 'the same token id, as JSON')
})

t.test('/tokenize: every object with type and data is a full token, validated as POST /tokens', async (t) => {
  const app = await startTestApp(t)
  const key = await appKey(app, {
    type: 'private',
    rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:create', 'token:read', 'token:search'] }],
  })
  const total = async () => (await app.request('GET', '/tokens?size=1', { key })).body.pagination.total_items as number
  const before = await total()

  const bad: [string, unknown, string][] = [
    ['an unknown type', { card: { type: 'card_numbr', data: VISA } }, 'card.type'],
    ['an unknown field', { card: { type: 'card_number', data: VISA, colour: 'red' } }, 'card.colour'],
    ['deduplicate_token not a boolean', [{ type: 'card_number', data: VISA, deduplicate_token: 'yes' }], '[0].deduplicate_token'],
    ['at the top level', { type: 'nope', data: VISA }, 'type'],
  ]
  for (const [label, body, field] of bad) {
    const res = await app.request('POST', '/tokenize', { key, body })
    t.equal(res.status, 400, `${label}: 400`)
    t.ok(res.body.errors?.[field], `${label}: names ${field} (${JSON.stringify(res.body.errors)})`)
  }
  t.equal(await total(), before, 'nothing was stored')

  const first = await app.request('POST', '/tokenize', { key, body: { card: { type: 'card_number', data: VISA, deduplicate_token: true } } })
  t.equal(first.status, 200)
  t.equal(first.body.card.type, 'card_number', 'a full token, not leaves')
  t.same(first.body.card.containers, ['/pci/high/'])
  t.equal(await total(), before + 1, 'one token, not one per field')
  const again = await app.request('POST', '/tokenize', { key, body: [{ type: 'card_number', data: VISA, deduplicate_token: true }, { type: 'card_number', data: VISA }] })
  t.equal(again.status, 200)
  t.equal(again.body[0].id, first.body.card.id, 'deduplicate_token returns the existing token')
  t.not(again.body[1].id, first.body.card.id, 'without it, a new token')
  t.equal(await total(), before + 2)
  const other = (await app.request('POST', '/tokens', { key, body: { type: 'token', data: 'other' } })).body.id as string
  const mixed = await app.request('POST', '/tokenize', {
    key,
    body: [VISA, 'other', 'new'].map((data, i) => ({ type: i === 0 ? 'card_number' : 'token', data, deduplicate_token: true })).concat([{ type: 'card_number', data: VISA, deduplicate_token: true }]),
  })
  t.same(
    mixed.body.map((v: { id: string }) => v.id).slice(0, 2).concat(mixed.body[3].id),
    [first.body.card.id, other, first.body.card.id],
    'several in one call, each found (the oldest of its type and value), the same one twice too',
  )
  t.equal(await total(), before + 4, 'only the value not stored before is new')
})

t.test('/tokenize deduplicates only into tokens every viewer sees at least masked', async (t) => {
  const app = await startTestApp(t)
  const owner = await appKey(app, { type: 'private', permissions: ['token:create', 'token:read'] })
  const stored = await app.request('POST', '/tokens', { key: owner, body: { type: 'card_number', data: VISA } })
  const writeOnly = await appKey(app, { type: 'public', permissions: ['token:create'] })
  const res = await app.request('POST', '/tokenize', { key: writeOnly, body: { c: { type: 'card_number', data: VISA, deduplicate_token: true } } })
  t.equal(res.status, 200)
  t.not(res.body.c.id, stored.body.id, 'a key that cannot read gets a new token: the answer does not say the value is stored')
})

t.test('PATCH /tokens/{id} with "metadata": null removes the metadata (RFC 7396)', async (t) => {
  const app = await startTestApp(t)
  const key = await appKey(app, { type: 'private', permissions: ['token:create', 'token:read', 'token:update'] })
  const id = (await app.request('POST', '/tokens', { key, body: { type: 'token', data: 'x', metadata: { k: 'v', j: 'w' } } })).body.id as string
  const patch = (body: unknown) => app.request('PATCH', `/tokens/${id}`, { key, rawBody: JSON.stringify(body), headers: { 'content-type': 'application/merge-patch+json' } })
  t.same((await patch({ metadata: { j: null } })).body.metadata, { k: 'v' }, 'a member set to null goes')
  const cleared = await patch({ metadata: null })
  t.equal(cleared.status, 200)
  t.same(cleared.body.metadata, {}, 'null removes it all')
  t.same((await app.request('GET', `/tokens/${id}`, { key })).body.metadata, {}, 'and it stays removed')
})

t.test('/tokenize stores its tokens together: one id twice is a conflict, nothing stored', async (t) => {
  const app = await startTestApp(t)
  const key = await appKey(app, { type: 'private', permissions: ['token:create', 'token:read'] })
  const total = async () => (await app.request('GET', '/tokens?size=1', { key })).body.pagination.total_items as number
  const twice = await app.request('POST', '/tokenize', { key, body: [{ id: 'same-id', type: 'token', data: 'a' }, 'leaf', { id: 'same-id', type: 'token', data: 'b' }] })
  t.equal(twice.status, 409)
  t.equal(await total(), 0, 'nothing stored')
  const many = await app.request('POST', '/tokenize', { key, body: Array.from({ length: 1000 }, (_, i) => ({ type: 'token', data: i })) })
  t.equal(many.status, 200)
  t.equal(await total(), 1000, 'a full call of 1,000 tokens')
  const back = await app.request('POST', '/detokenize', { key, body: many.body.slice(0, 3).map((v: { id: string }) => `{{ ${v.id} }}`) })
  t.equal(back.status, 200)
  const taken = await app.request('POST', '/tokenize', { key, body: ['new', { id: many.body[5].id, type: 'token', data: 'x' }] })
  t.equal(taken.status, 409, 'an id a live token holds')
  t.equal(await total(), 1000, 'nothing stored')
})
