import t, { type Test } from 'tap'
import { startTestApp, type TestApp, type TestResponse } from '../helpers/app.js'
import { application, appKey } from '../helpers/tokens.js'

const PROBLEM = 'application/problem+json'
const MERGE = { 'content-type': 'application/merge-patch+json' }
// Valid RFC 3339, but year 10000 in UTC, which PGlite cannot hold.
const YEAR_10000 = '9999-12-31T23:59:59-23:59'

/** A key that creates, reads and updates tokens anywhere, and a way to count what it sees. */
async function tokenWriter(app: TestApp) {
  const key = await appKey(app, {
    type: 'private',
    rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:create', 'token:read', 'token:update', 'token:use'] }],
  })
  const count = async () => (await app.request('GET', '/tokens', { key })).body.pagination.total_items as number
  return { key, count }
}

/** A 400 problem whose `errors` name `field`. */
function assertNames(t: Test, res: TestResponse, field: string, label: string): void {
  t.equal(res.status, 400, `${label}: 400 (${res.text.slice(0, 300)})`)
  t.equal(res.headers.get('content-type'), PROBLEM, `${label}: problem+json`)
  t.ok(res.body?.errors?.[field], `${label}: names ${field}`)
}

t.test('templates that compile but cannot apply to the data are 400s naming the field', async (t) => {
  const app = await startTestApp(t)
  const { key, count } = await tokenWriter(app)
  const before = await count()
  const fingerprint = { type: 'token', data: { a: 1 }, fingerprint_expression: '{{ data | last4 }}' }
  const reveal = { type: 'token', data: { a: 1 }, search_indexes: ['{{ data | reveal_last: 2 }}'] }
  const slice = { type: 'token', data: true, search_indexes: ['{{ data | slice: 0, 2 }}'] }
  const cases: [string, string, unknown, string][] = [
    ['fingerprint over an object', '/tokens', fingerprint, 'fingerprint_expression'],
    ['reveal_last over an object', '/tokens', reveal, 'search_indexes[0]'],
    ['slice over a boolean', '/tokens', slice, 'search_indexes[0]'],
    ['tokenize: a full token', '/tokenize', fingerprint, 'fingerprint_expression'],
    ['tokenize: nested', '/tokenize', { ok: 'fine', x: { y: reveal } }, 'x.y.search_indexes[0]'],
    ['tokenize: in an array', '/tokenize', [slice], '[0].search_indexes[0]'],
  ]
  for (const [label, path, body, field] of cases) assertNames(t, await app.request('POST', path, { key, body }), field, label)
  t.equal(await count(), before, 'nothing was stored')

  const objectToken = await app.request('POST', '/tokens', { key, body: { type: 'token', data: { a: 1 } } })
  t.equal(objectToken.status, 201)
  const patched = await app.request('PATCH', `/tokens/${objectToken.body.id}`, { key, body: { fingerprint_expression: '{{ data | last4 }}' }, headers: MERGE })
  assertNames(t, patched, 'fingerprint_expression', 'PATCH a fingerprint expression')
  const stringToken = await app.request('POST', '/tokens', { key, body: { type: 'token', data: 'abcdef', search_indexes: ['{{ data | last4 }}'] } })
  t.equal(stringToken.status, 201)
  const reshaped = await app.request('PATCH', `/tokens/${stringToken.body.id}`, { key, body: { data: { z: 1 } }, headers: MERGE })
  assertNames(t, reshaped, 'search_indexes[0]', 'PATCH data the search index cannot apply to')

  const objectAfter = await app.request('GET', `/tokens/${objectToken.body.id}`, { key })
  t.same([objectAfter.body.data, objectAfter.body.fingerprint_expression], [{ a: 1 }, undefined], 'the object token is unchanged')
  const stringAfter = await app.request('GET', `/tokens/${stringToken.body.id}`, { key })
  t.equal(stringAfter.body.data, 'abcdef', 'the string token is unchanged')
  t.equal(stringAfter.body.modified_at, stringToken.body.modified_at)
})

t.test("a Reactor's tokenize result gets the checks /tokenize applies to a body", async (t) => {
  const app = await startTestApp(t, { SVC_REACTOR_TIMEOUT_MS: '5000' })
  const { key, count } = await tokenWriter(app)
  const actor = await application(app, {
    type: 'private',
    rules: [{ priority: 1, container: '/', transform: 'mask', permissions: ['token:create', 'token:use'] }],
  })
  const before = await count()
  const nul = 'String.fromCharCode(0)'
  const lone = 'String.fromCharCode(0xd800)'
  const cases: [string, string, string][] = [
    ['NUL in a metadata value', `{ type: 'token', data: 'x', metadata: { a: 'b' + ${nul} } }`, 'metadata.a'],
    ['NUL in a metadata key', `{ type: 'token', data: 'x', metadata: { ['a' + ${nul}]: 'b' } }`, 'metadata'],
    ['lone surrogate in a metadata value', `{ type: 'token', data: 'x', metadata: { a: ${lone} } }`, 'metadata.a'],
    ['lone surrogate in the id', `{ type: 'token', data: 'x', id: 'abc' + ${lone} + 'def' }`, 'id'],
    ['NUL in a container', `{ type: 'token', data: 'x', containers: ['/a/' + ${nul}] }`, 'containers[0]'],
    ['NUL in a search index', `{ type: 'token', data: 'x', search_indexes: ['{{ data }}' + ${nul}] }`, 'search_indexes[0]'],
    ['NUL in a nested leaf', `{ n: { deep: 'a' + ${nul} } }`, 'n.deep'],
    ['lone surrogate in a full token inside', `{ n: { type: 'token', data: 'x', id: 'abc' + ${lone} } }`, 'n.id'],
    ['a template that cannot apply', `{ type: 'token', data: { a: 1 }, fingerprint_expression: '{{ data | last4 }}' }`, 'fingerprint_expression'],
    ['a 5,000-character metadata key', `{ type: 'token', data: 'x', metadata: { ['k'.repeat(5000)]: 'v' } }`, 'metadata'],
    ['an expiry past year 9999', `{ type: 'token', data: 'x', expires_at: '${YEAR_10000}' }`, 'expires_at'],
  ]
  for (const [label, value, field] of cases) {
    const reactor = await app.request('POST', '/reactors', {
      body: { name: label, code: `module.exports = async () => ({ raw: 'ok', tokenize: ${value} })`, application: { id: actor.id } },
    })
    t.equal(reactor.status, 201, `${label}: Reactor saved`)
    assertNames(t, await app.request('POST', `/reactors/${reactor.body.id}/react`, { key, body: { args: {} } }), field, label)
  }
  t.equal(await count(), before, 'nothing was stored')
})

t.test('/tokenize applies the metadata limits of POST /tokens', async (t) => {
  const app = await startTestApp(t)
  const { key, count } = await tokenWriter(app)
  const before = await count()
  const cases: [string, Record<string, string>][] = [
    ['a 5,000-character key', { ['k'.repeat(5000)]: 'v' }],
    ['a 100 KB value', { k: 'v'.repeat(100_000) }],
    ['an empty key', { '': 'v' }],
    ['21 keys', Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`k${i}`, 'v']))],
  ]
  for (const [label, metadata] of cases) {
    const token = { type: 'token', data: 'x', metadata }
    const direct = await app.request('POST', '/tokens', { key, body: token })
    t.equal(direct.status, 400, `POST /tokens, ${label}: 400`)
    t.ok(Object.keys(direct.body.errors ?? {}).some((f) => f.startsWith('metadata')), `POST /tokens, ${label}: names metadata`)
    const tokenized = await app.request('POST', '/tokenize', { key, body: { t: token } })
    t.equal(tokenized.status, 400, `/tokenize, ${label}: 400 (${tokenized.text.slice(0, 200)})`)
    t.ok(Object.keys(tokenized.body.errors ?? {}).some((f) => f.startsWith('t.metadata')), `/tokenize, ${label}: names t.metadata`)
  }
  t.equal(await count(), before, 'nothing was stored')
  const fits = await app.request('POST', '/tokenize', { key, body: { type: 'token', data: 'x', metadata: { ['k'.repeat(100)]: 'v'.repeat(500) } } })
  t.equal(fits.status, 200, 'the limits themselves are allowed')
})

t.test('an expiry past year 9999 is a 400 on every path', async (t) => {
  const app = await startTestApp(t)
  const { key, count } = await tokenWriter(app)
  const before = await count()
  assertNames(t, await app.request('POST', '/tokens', { key, body: { type: 'token', data: 'x', expires_at: YEAR_10000 } }), 'expires_at', 'POST /tokens')
  assertNames(t, await app.request('POST', '/tokenize', { key, body: { type: 'token', data: 'x', expires_at: YEAR_10000 } }), 'expires_at', '/tokenize')
  assertNames(t, await app.request('POST', '/tokenize', { key, body: { a: { type: 'token', data: 'x', expires_at: '2030-01-01T00:00:60Z' } } }), 'a.expires_at', '/tokenize, a leap second')
  t.equal(await count(), before, 'nothing was stored')
  const id = (await app.request('POST', '/tokens', { key, body: { type: 'token', data: 'x' } })).body.id
  assertNames(t, await app.request('PATCH', `/tokens/${id}`, { key, body: { expires_at: YEAR_10000 }, headers: MERGE }), 'expires_at', 'PATCH /tokens')
  t.equal((await app.request('GET', `/tokens/${id}`, { key })).body.expires_at, undefined, 'the token is unchanged')
  const apps = (await app.request('GET', '/applications')).body.pagination.total_items
  const created = await app.request('POST', '/applications', { body: { name: 'late', type: 'private', permissions: ['token:read'], expires_at: YEAR_10000 } })
  assertNames(t, created, 'expires_at', 'POST /applications')
  t.equal((await app.request('GET', '/applications')).body.pagination.total_items, apps, 'no Application was stored')
  const latest = await app.request('POST', '/tokenize', { key, body: { type: 'token', data: 'x', expires_at: '9999-12-31T23:59:59Z' } })
  t.equal(latest.status, 200, 'the last second of 9999 is fine')
})

t.test('masks, fingerprints and search indexes render at most twice their data and 1,024 characters', async (t) => {
  const app = await startTestApp(t)
  const writer = await appKey(app, { type: 'private', rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:create', 'token:read'] }] })
  const masked = await appKey(app, { type: 'private', rules: [{ priority: 1, container: '/', transform: 'mask', permissions: ['token:read'] }] })
  const data = 'x'.repeat(16_000)
  const create = (body: Record<string, unknown>) => app.request('POST', '/tokens', { key: writer, body: { type: 'token', data, ...body } })

  // One window onto the data, the usual mask, renders in full.
  const usual = await create({ mask: '{{ data | reveal_last: 4 }}' })
  t.equal((await app.request('GET', `/tokens/${usual.body.id}`, { key: masked })).body.data.length, 16_000)
  // A mask of 1,400 such windows rendered 22 MB on every masked read: it is left out, as a mask that cannot render is.
  const repeated = await create({ mask: Array.from({ length: 1400 }, () => '{{ data | reveal_last: 4 }}') })
  t.equal(repeated.status, 201)
  const read = await app.request('GET', `/tokens/${repeated.body.id}`, { key: masked })
  t.equal(read.status, 200)
  t.equal(read.body.data, undefined, 'no data under mask')
  t.ok(read.text.length < JSON.stringify(read.body.mask).length + 2_000, `an answer no longer than its mask's own text (${read.text.length} bytes)`)
  const detokenized = await app.request('POST', '/detokenize', { key: masked, body: { v: `{{ ${repeated.body.id} }}` } })
  t.ok(detokenized.text.length < 10_000, `and a short detokenization (${detokenized.text.length} bytes)`)

  // Twenty search indexes of sixty references each rendered 51 MB for one request.
  const many = (n: number) => '{{ data }}'.repeat(n)
  for (const [field, body] of [
    ['search_indexes[2]', { search_indexes: [many(1), '{{ data | last4 }}', many(45)] }],
    ['fingerprint_expression', { fingerprint_expression: many(45) }],
  ] as const) {
    const res = await create(body)
    t.equal(res.status, 400, field)
    t.match(res.body.errors, { [field]: [/renders to more than/] })
  }
  t.equal((await create({ search_indexes: [many(1), '{{ data | last4 }}'] })).status, 201, 'indexes of the data itself are fine')
})
