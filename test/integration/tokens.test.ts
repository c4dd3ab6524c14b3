import t from 'tap'
import { startTestApp } from '../helpers/app.js'
import { testClock } from '../helpers/clock.js'
import { appKey, card, VISA } from '../helpers/tokens.js'

t.test('tokens: create, read, update, delete, list', async (t) => {
  const app = await startTestApp(t)
  const writer = await appKey(app, { type: 'private', permissions: ['token:create', 'token:read', 'token:update', 'token:delete'] })
  const revealer = await appKey(app, {
    type: 'private',
    rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:read', 'token:search'] }],
  })

  t.test('every type: valid data is 201, invalid is 400 with errors', async (t) => {
    const valid: [string, unknown, string][] = [
      ['token', { any: ['json', 1] }, '/general/high/'],
      ['card', card(), '/pci/high/'],
      ['card_number', VISA, '/pci/high/'],
      ['bank', { routing_number: '011000015', account_number: '123456789' }, '/bank/high/'],
      ['us_bank_routing_number', '011000015', '/bank/low/'],
      ['social_security_number', '123-45-6789', '/pii/high/'],
      ['employer_id_number', '12-3456789', '/pii/high/'],
    ]
    for (const [type, data, container] of valid) {
      const res = await app.request('POST', '/tokens', { key: writer, body: { type, data } })
      t.equal(res.status, 201, `${type} valid`)
      t.same(res.body.containers, [container], `${type} default container`)
      t.notOk(JSON.stringify(res.body).includes('"ciphertext"'), 'no ciphertext in responses')
    }
    const invalid: [string, unknown][] = [
      ['card', { ...card(), number: '4242424242424241' }],
      ['card', { ...card(), expiration_month: 13 }],
      ['card_number', '1234'],
      ['bank', { routing_number: '011000016', account_number: '1' }],
      ['us_bank_routing_number', '123'],
      ['social_security_number', '12-345-6789'],
      ['employer_id_number', 'abc'],
      ['token', null],
    ]
    for (const [type, data] of invalid) {
      const res = await app.request('POST', '/tokens', { key: writer, body: { type, data } })
      t.equal(res.status, 400, `${type} invalid: ${JSON.stringify(data)}`)
      t.ok(res.body.errors, 'errors map')
      t.notMatch(JSON.stringify(res.body), /4242424242424241|011000016/, 'no plaintext in the error')
    }
    const badType = await app.request('POST', '/tokens', { key: writer, body: { type: 'passport', data: 'x' } })
    t.equal(badType.status, 400)
    t.ok(badType.body.errors.type)
  })

  t.test('transforms: plain permissions mask, reveal rules reveal', async (t) => {
    const created = await app.request('POST', '/tokens', { key: writer, body: { type: 'card', data: card() } })
    t.equal(created.status, 201)
    t.match(created.body.data.number, /4242$/, 'create answers masked data')
    t.not(created.body.data.number, VISA)
    const masked = await app.request('GET', `/tokens/${created.body.id}`, { key: writer })
    t.equal(masked.status, 200)
    t.not(masked.body.data.number, VISA)
    const revealed = await app.request('GET', `/tokens/${created.body.id}`, { key: revealer })
    t.same(revealed.body.data, card())
    const plain = await app.request('POST', '/tokens', { key: writer, body: { type: 'token', data: 'secret' } })
    const noMask = await app.request('GET', `/tokens/${plain.body.id}`, { key: writer })
    t.notOk('data' in noMask.body, 'mask without a mask omits data')
  })

  t.test('client-chosen ids, 409 on duplicates, invalid ids 400', async (t) => {
    const res = await app.request('POST', '/tokens', { key: writer, body: { id: 'customer-42-card', type: 'card_number', data: VISA } })
    t.equal(res.status, 201)
    t.equal(res.body.id, 'customer-42-card')
    const dup = await app.request('POST', '/tokens', { key: writer, body: { id: 'customer-42-card', type: 'card_number', data: VISA } })
    t.equal(dup.status, 409)
    for (const id of ['ab', 'a/b/c', 'has space', 'x'.repeat(401), 'a{b}c', 'q?x']) {
      const bad = await app.request('POST', '/tokens', { key: writer, body: { id, type: 'token', data: 1 } })
      t.equal(bad.status, 400, `id ${JSON.stringify(id.slice(0, 20))}`)
      t.ok(bad.body.errors.id)
    }
  })

  t.test('merge-patch update and delete', async (t) => {
    const created = await app.request('POST', '/tokens', { key: writer, body: { type: 'token', data: { a: 1, b: 2 }, metadata: { k: 'v', drop: 'me' } } })
    const id = created.body.id
    const patched = await app.request('PATCH', `/tokens/${id}`, {
      key: writer,
      rawBody: JSON.stringify({ data: { b: null, c: 3 }, metadata: { drop: null, new: 'n' } }),
      headers: { 'content-type': 'application/merge-patch+json' },
    })
    t.equal(patched.status, 200)
    t.same(patched.body.metadata, { k: 'v', new: 'n' })
    const read = await app.request('GET', `/tokens/${id}`, { key: revealer })
    t.same(read.body.data, { a: 1, c: 3 })
    const typeChange = await app.request('PATCH', `/tokens/${id}`, { key: writer, body: { type: 'card' }, headers: { 'content-type': 'application/merge-patch+json' } })
    t.equal(typeChange.status, 400)
    const wrongMedia = await app.request('PATCH', `/tokens/${id}`, { key: writer, rawBody: '{}', headers: { 'content-type': 'text/plain' } })
    t.equal(wrongMedia.status, 415)
    t.equal((await app.request('DELETE', `/tokens/${id}`, { key: writer })).status, 204)
    t.equal((await app.request('GET', `/tokens/${id}`, { key: writer })).status, 404)
    t.equal((await app.request('DELETE', `/tokens/${id}`, { key: writer })).status, 404)
  })

  t.test('list with filters and pagination', async (t) => {
    for (let i = 0; i < 3; i++) await app.request('POST', '/tokens', { key: writer, body: { type: 'token', data: i, metadata: { batch: 'L' }, containers: ['/list/'] } })
    const page = await app.request('GET', '/tokens?metadata.batch=L&size=2', { key: revealer })
    t.equal(page.status, 200)
    t.same(page.body.pagination, { total_items: 3, page_number: 1, page_size: 2, total_pages: 2 })
    const byContainer = await app.request('GET', '/tokens?container=/list/', { key: revealer })
    t.equal(byContainer.body.pagination.total_items, 3)
    const byType = await app.request('GET', '/tokens?type=card&size=100', { key: revealer })
    t.ok(byType.body.data.every((tok: { type: string }) => tok.type === 'card'))
    for (const q of ['size=0', 'page=0', 'type=nope', 'colour=red']) t.equal((await app.request('GET', `/tokens?${q}`, { key: revealer })).status, 400, q)
  })
})

t.test('access rules: priority, container scope, 403', async (t) => {
  const app = await startTestApp(t)
  const writer = await appKey(app, { type: 'private', permissions: ['token:create'] })
  const scoped = await appKey(app, {
    type: 'private',
    rules: [
      { priority: 1, container: '/pci/high/', transform: 'redact', permissions: ['token:read'] },
      { priority: 2, container: '/pci/', transform: 'reveal', permissions: ['token:read'] },
      { priority: 3, container: '/general/', transform: 'mask', permissions: ['token:read'] },
    ],
  })
  const high = await app.request('POST', '/tokens', { key: writer, body: { type: 'card_number', data: VISA } })
  const low = await app.request('POST', '/tokens', { key: writer, body: { type: 'card_number', data: VISA, containers: ['/pci/low/'] } })
  const pii = await app.request('POST', '/tokens', { key: writer, body: { type: 'social_security_number', data: '123-45-6789' } })
  const r1 = await app.request('GET', `/tokens/${high.body.id}`, { key: scoped })
  t.equal(r1.status, 200)
  t.notOk('data' in r1.body, 'priority 1 redacts /pci/high/')
  const r2 = await app.request('GET', `/tokens/${low.body.id}`, { key: scoped })
  t.equal(r2.body.data, VISA, 'priority 2 reveals the rest of /pci/')
  const r3 = await app.request('GET', `/tokens/${pii.body.id}`, { key: scoped })
  t.equal(r3.status, 403, 'no rule covers /pii/')
  const list = await app.request('GET', '/tokens', { key: scoped })
  t.equal(list.body.pagination.total_items, 2, 'lists count only visible tokens')
  const publicKey = await appKey(app, { type: 'public', rules: [{ priority: 1, container: '/pci/', transform: 'redact', permissions: ['token:create'] }] })
  t.equal((await app.request('POST', '/tokens', { key: publicKey, body: { type: 'card_number', data: VISA } })).status, 201)
  t.equal((await app.request('POST', '/tokens', { key: publicKey, body: { type: 'token', data: 'x' } })).status, 403, 'outside its container')
  t.equal((await app.request('GET', `/tokens/${high.body.id}`, { key: publicKey })).status, 403)
})

t.test('dedup, search, tokenize, detokenize', async (t) => {
  const app = await startTestApp(t)
  const key = await appKey(app, {
    type: 'private',
    rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:create', 'token:read', 'token:search'] }],
  })
  const a = await app.request('POST', '/tokens', { key, body: { type: 'card', data: card(), deduplicate_token: true, search_indexes: ['{{ data.number | last4 }}'], metadata: { customer: 'c1' } } })
  const b = await app.request('POST', '/tokens', { key, body: { type: 'card', data: { ...card(), cvc: '999' }, deduplicate_token: true } })
  t.equal(a.status, 201)
  t.equal(b.body.id, a.body.id, 'same number deduplicates')
  t.ok(a.body.fingerprint)
  const c = await app.request('POST', '/tokens', { key, body: { type: 'card', data: card() } })
  t.not(c.body.id, a.body.id, 'without the flag a new token is made')
  t.equal(c.body.fingerprint, a.body.fingerprint)

  const s1 = await app.request('POST', '/tokens/search', { key, body: { query: 'data:4242 type:card' } })
  t.equal(s1.status, 200)
  t.same(s1.body.data.map((x: { id: string }) => x.id), [a.body.id])
  const s2 = await app.request('POST', '/tokens/search', { key, body: { query: `fingerprint:${a.body.fingerprint}` } })
  t.equal(s2.body.pagination.total_items, 2)
  const s3 = await app.request('POST', '/tokens/search', { key, body: { query: 'metadata.customer:c1' } })
  t.equal(s3.body.pagination.total_items, 1)
  // Terms are ANDed: a filter a backend was given cannot be widened by adding the key again.
  for (const path of ['/tokens/search', '/v2/tokens/search']) {
    const same = await app.request('POST', path, { key, body: { query: 'metadata.customer:c1 metadata.customer:c1' } })
    t.equal((same.body.pagination?.total_items ?? same.body.data.length) as number, 1, `${path}: the same value twice is the same filter`)
    const both = await app.request('POST', path, { key, body: { query: 'metadata.customer:other metadata.customer:c1' } })
    t.same(both.body.data, [], `${path}: two values for one key match nothing`)
  }
  const repeated = await app.request('GET', '/tokens?metadata.customer=other&metadata.customer=c1', { key })
  t.equal(repeated.status, 400, 'a list filter given twice with two values is refused')
  t.match(repeated.body.errors, { 'metadata.customer': [/more than once/] })
  t.equal((await app.request('GET', '/tokens?metadata.customer=c1&metadata.customer=c1', { key })).body.pagination.total_items, 1)
  t.equal((await app.request('POST', '/tokens/search', { key, body: { query: 'colour:red' } })).status, 400)
  t.equal((await app.request('POST', '/tokens/search', { key, body: { query: 'nonsense' } })).status, 400)

  const tokenized = await app.request('POST', '/tokenize', { key, body: { name: 'Ada', card: { type: 'card_number', data: VISA }, tags: ['x', 1] } })
  t.equal(tokenized.status, 200)
  t.type(tokenized.body.name, 'string')
  t.equal(tokenized.body.card.type, 'card_number')
  t.equal(tokenized.body.tags.length, 2)
  const detok = await app.request('POST', '/detokenize', {
    key,
    body: { n: `{{ ${tokenized.body.name} }}`, c: `card {{ ${tokenized.body.card.id} | last4 }}`, one: `{{${tokenized.body.tags[1]}}}` },
  })
  t.equal(detok.status, 200)
  t.same(detok.body, { n: 'Ada', c: 'card 4242', one: 1 })
  t.equal((await app.request('POST', '/detokenize', { key, body: { x: '{{ no-such-token }}' } })).status, 400)
  t.equal((await app.request('POST', '/detokenize', { key, body: { x: '{{ unclosed' } })).status, 400)

  const before = await app.request('GET', '/tokens?size=1', { key })
  const failing = await app.request('POST', '/tokenize', { key, body: { ok: 'fine', bad: { type: 'card_number', data: '1234' } } })
  t.equal(failing.status, 400)
  t.ok(failing.body.errors['bad.data'], JSON.stringify(failing.body.errors))
  const after = await app.request('GET', '/tokens?size=1', { key })
  t.equal(after.body.pagination.total_items, before.body.pagination.total_items, 'all or nothing')
})

t.test('expired tokens are gone at once', async (t) => {
  const clock = testClock()
  const app = await startTestApp(t, {}, { clock })
  const key = await appKey(app, { type: 'private', rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:create', 'token:read'] }] })
  const soon = new Date(clock() + 60_000).toISOString()
  const tok = await app.request('POST', '/tokens', { key, body: { type: 'token', data: 'x', expires_at: soon } })
  t.equal(tok.status, 201)
  t.equal((await app.request('GET', `/tokens/${tok.body.id}`, { key })).status, 200)
  t.equal((await app.request('POST', '/detokenize', { key, body: { x: `{{ ${tok.body.id} }}` } })).status, 200, 'and cached for detokenization')
  clock.advance(60_000)
  t.equal((await app.request('GET', `/tokens/${tok.body.id}`, { key })).status, 404)
  t.equal((await app.request('POST', '/detokenize', { key, body: { x: `{{ ${tok.body.id} }}` } })).status, 400)
  t.equal((await app.request('POST', '/tokens', { key, body: { type: 'token', data: 'x', expires_at: '2000-01-01T00:00:00Z' } })).status, 400)

  // Its id is free again at once, not only after the sweep (it was a 409 until then).
  const reused = await app.request('POST', '/tokens', { key, body: { id: tok.body.id, type: 'token', data: 'new' } })
  t.equal(reused.status, 201, 'POST /tokens may take the id of an expired token')
  const read = await app.request('GET', `/tokens/${tok.body.id}`, { key })
  t.match(read.body, { data: 'new', expires_at: null }, 'and the new token is the one stored')
  t.equal((await app.request('POST', '/detokenize', { key, body: { x: `{{ ${tok.body.id} }}` } })).body.x, 'new')
  t.equal((await app.request('POST', '/tokens', { key, body: { id: tok.body.id, type: 'token', data: 'again' } })).status, 409, 'a live token still holds its id')
  const other = await app.request('POST', '/tokens', { key, body: { id: 'expiring-2', type: 'token', data: 'x', expires_at: new Date(clock() + 60_000).toISOString() } })
  t.equal(other.status, 201)
  clock.advance(60_000)
  const tokenized = await app.request('POST', '/tokenize', { key, body: { a: { id: 'expiring-2', type: 'token', data: 'y' } } })
  t.equal(tokenized.status, 200, '/tokenize too')
  t.equal((await app.request('POST', '/tokenize', { key, body: { a: { id: 'expiring-2', type: 'token', data: 'z' } } })).status, 409)
})

t.test('cross-tenant tokens are 404', async (t) => {
  const app = await startTestApp(t, { SVC_OPERATOR_KEY: 'operator-key-0123456789abcdef0123456789' })
  const key = await appKey(app, { type: 'private', permissions: ['token:create', 'token:read', 'token:delete'] })
  const tok = await app.request('POST', '/tokens', { key, body: { type: 'token', data: 'mine' } })
  const other = await app.request('POST', '/tenants', { key: 'operator-key-0123456789abcdef0123456789', body: { name: 'other' } })
  const otherKey = (await app.request('POST', '/applications', { key: other.body.application.key, body: { name: 'o', type: 'private', permissions: ['token:read', 'token:delete'] } })).body.key
  t.equal((await app.request('GET', `/tokens/${tok.body.id}`, { key: otherKey })).status, 404)
  t.equal((await app.request('DELETE', `/tokens/${tok.body.id}`, { key: otherKey })).status, 404)
  t.equal((await app.request('POST', '/detokenize', { key: otherKey, body: { x: `{{ ${tok.body.id} }}` } })).status, 400)
  t.equal((await app.request('GET', '/tokens', { key: otherKey })).body.pagination.total_items, 0)
})

t.test('concurrent patches of one token all apply: none overwrites another', async (t) => {
  const app = await startTestApp(t)
  const key = await appKey(app, { type: 'private', rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:create', 'token:read', 'token:update'] }] })
  const id = (await app.request('POST', '/tokens', { key, body: { type: 'token', data: { n: 0 } } })).body.id as string
  const patch = (body: unknown) => app.request('PATCH', `/tokens/${id}`, { key, rawBody: JSON.stringify(body), headers: { 'content-type': 'application/merge-patch+json' } })
  const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => patch({ metadata: { [`k${i}`]: 'v' }, data: { [`d${i}`]: i } })))
  t.same(answers.map((r) => r.status), Array(10).fill(200))
  const stored = (await app.request('GET', `/tokens/${id}`, { key })).body
  t.same(Object.keys(stored.metadata).sort(), Array.from({ length: 10 }, (_, i) => `k${i}`).sort(), 'every metadata key')
  t.same(Object.keys(stored.data).sort(), ['n', ...Array.from({ length: 10 }, (_, i) => `d${i}`)].sort(), 'every data member')
})
