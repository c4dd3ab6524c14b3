/* eslint-disable @typescript-eslint/no-explicit-any -- the test reads arbitrary JSON pages */
import t from 'tap'
import { startTestApp, type TestApp } from '../helpers/app.js'
import { databaseBefore } from '../helpers/migrations.js'
import { appKey, card, createToken } from '../helpers/tokens.js'
import { migrationSource } from '../../migrations/index.js'

// A search index or fingerprint expression that tests more of a token's data than its mask shows
// (a card's CVC alone) marks the token when written; its equality tests then need reveal.

const ALL = ['token:create', 'token:read', 'token:search', 'token:update']

async function keys(app: TestApp) {
  const rule = (transform: string) => [{ priority: 1, container: '/', transform, permissions: ALL }]
  return { writer: await appKey(app, { type: 'private', rules: rule('reveal') }), masked: await appKey(app, { type: 'private', rules: rule('mask') }) }
}

const ids = (res: any): string[] => res.body.data.map((d: any) => d.id).sort()

t.test('a mask reader cannot test a CVC through a search index; a reveal reader can', async (t) => {
  const app = await startTestApp(t)
  const { writer, masked } = await keys(app)
  const cvcIndexed = await createToken(app, writer, { type: 'card', data: card(), search_indexes: ['{{ data.cvc }}'] })
  const last4Indexed = await createToken(app, writer, { type: 'card', data: { ...card(), cvc: '999' }, search_indexes: ['{{ data.number | last4 }}', '{{ data.number }}'] })
  for (const path of ['/tokens/search', '/v2/tokens/search']) {
    t.same(ids(await app.request('POST', path, { key: masked, body: { query: 'data:123' } })), [], `${path}: the CVC index is not tested under mask`)
    t.same(ids(await app.request('POST', path, { key: writer, body: { query: 'data:123' } })), [cvcIndexed], `${path}: reveal tests it`)
    t.same(ids(await app.request('POST', path, { key: masked, body: { query: 'data:4242' } })), [last4Indexed], `${path}: an index within the mask is tested under mask`)
    t.same(ids(await app.request('POST', path, { key: masked, body: { query: 'data:4242424242424242' } })), [last4Indexed], `${path}: so is the whole number the fingerprint tests anyway`)
  }
  // The marked token is still listed, shown masked, by terms that do not test its data.
  const listed = await app.request('POST', '/tokens/search', { key: masked, body: { query: `id:${cvcIndexed}` } })
  t.same(ids(listed), [cvcIndexed])
  t.ok(listed.body.data[0].fingerprint, 'an index beyond the mask does not hide the default fingerprint')
})

t.test('a fingerprint expression beyond the mask: its fingerprint, filter, terms and deduplication need reveal', async (t) => {
  const app = await startTestApp(t)
  const { writer, masked } = await keys(app)
  const body = { type: 'card', data: card(), fingerprint_expression: '{{ data.cvc }}' }
  const id = await createToken(app, writer, body)
  const revealed = await app.request('GET', `/tokens/${id}`, { key: writer })
  const fingerprint = revealed.body.fingerprint as string
  t.ok(fingerprint, 'reveal shows the fingerprint')
  const read = await app.request('GET', `/tokens/${id}`, { key: masked })
  t.equal(read.status, 200)
  t.equal(read.body.fingerprint, undefined, 'mask does not: it would group tokens by CVC')
  t.match(read.body.data, { number: /^X+4242$/ }, 'the token is still shown masked')
  t.same(ids(await app.request('POST', '/tokens/search', { key: masked, body: { query: `fingerprint:${fingerprint}` } })), [])
  t.same(ids(await app.request('POST', '/tokens/search', { key: writer, body: { query: `fingerprint:${fingerprint}` } })), [id])
  t.same(ids(await app.request('GET', `/v2/tokens?fingerprint=${fingerprint}`, { key: masked })), [])
  t.same(ids(await app.request('GET', `/v2/tokens?fingerprint=${fingerprint}`, { key: writer })), [id])
  // Deduplication answers "is a stored token's CVC 123?" too.
  const dedup = { ...body, data: { ...card('4000056655665556'), cvc: '123' }, deduplicate_token: true }
  const maskedCreate = await app.request('POST', '/tokens', { key: masked, body: dedup })
  t.equal(maskedCreate.status, 201)
  t.not(maskedCreate.body.id, id, 'a mask writer gets a new token')
  t.equal(maskedCreate.body.fingerprint, undefined)
  const tokenized = await app.request('POST', '/tokenize', { key: masked, body: { a: dedup } })
  t.not(tokenized.body.a.id, id, '/tokenize neither')
  t.equal((await app.request('POST', '/tokens', { key: writer, body: dedup })).body.id, id, 'a reveal writer gets the stored one')
})

t.test('changing the expressions recomputes the marks', async (t) => {
  const app = await startTestApp(t)
  const { writer, masked } = await keys(app)
  const id = await createToken(app, writer, { type: 'card', data: card(), search_indexes: ['{{ data.number | last4 }}'] })
  const patch = async (search_indexes: string[]) =>
    (await app.request('PATCH', `/tokens/${id}`, { key: writer, body: { search_indexes }, headers: { 'content-type': 'application/merge-patch+json' } })).status
  const search = async () => ids(await app.request('POST', '/tokens/search', { key: masked, body: { query: 'data:4242' } }))
  t.same(await search(), [id])
  t.equal(await patch(['{{ data.number | last4 }}', '{{ data.cvc }}']), 200)
  t.same(await search(), [], 'an added CVC index marks the token')
  t.equal(await patch(['{{ data.number | last4 }}']), 200)
  t.same(await search(), [id], 'and removing it clears the mark')
})

t.test('the migration marks tokens stored before it', async (t) => {
  const knex = await databaseBefore(t, '20261129000100_token_test_marks')
  const [tenant] = await knex('tenants').insert({ id: '00000000-0000-4000-8000-000000000001', name: 't', created_at: new Date(), modified_at: new Date() }).returning('id')
  const row = (id: string, type: string, fingerprint_expression: string | null, search_indexes: string[]) => ({
    tenant_id: tenant.id,
    id,
    type,
    containers: JSON.stringify(['/pci/high/']),
    fingerprint_expression,
    search_indexes: JSON.stringify(search_indexes),
    key_id: 'k',
    encrypted_key: Buffer.alloc(1),
    ciphertext: Buffer.alloc(1),
    created_at: new Date(),
    modified_at: new Date(),
  })
  await knex('tokens').insert([
    row('plain', 'card', null, []),
    row('last4', 'card', '{{ data.number | last4 }}', ['{{ data.number }}']),
    row('cvc-index', 'card', null, ['{{ data.number | last4 }}', '{{ data.cvc }}']),
    row('cvc-print', 'card', '{{ data.cvc }}', []),
    row('broken', 'token', '{{ data | nope }}', []),
  ])
  await knex.migrate.up({ migrationSource })
  const marks = await knex('tokens').select('id', 'fingerprint_beyond_mask', 'search_beyond_mask').orderBy('id')
  t.same(marks, [
    { id: 'broken', fingerprint_beyond_mask: true, search_beyond_mask: false },
    { id: 'cvc-index', fingerprint_beyond_mask: false, search_beyond_mask: true },
    { id: 'cvc-print', fingerprint_beyond_mask: true, search_beyond_mask: false },
    { id: 'last4', fingerprint_beyond_mask: false, search_beyond_mask: false },
    { id: 'plain', fingerprint_beyond_mask: false, search_beyond_mask: false },
  ])
})
