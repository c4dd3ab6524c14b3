import { randomBytes } from 'node:crypto'
import t from 'tap'
import { startTestApp } from '../helpers/app.js'
import { appKey, card } from '../helpers/tokens.js'
import { parseKeyring } from '../../src/vault/crypto/index.js'
import { rewrapAll } from '../../src/vault/rewrap.js'

const SENTINEL = '4000056655665556'
const newKey = (id: string) => `${id}:${randomBytes(32).toString('base64')}`

t.test('no plaintext in the database or the logs', async (t) => {
  const lines: string[] = []
  const app = await startTestApp(t, { SVC_LOG_LEVEL: 'trace' }, { logLines: lines })
  const key = await appKey(app, { type: 'private', permissions: ['token:create', 'token:read'] })
  const res = await app.request('POST', '/tokens', { key, body: { type: 'card', data: card(SENTINEL), search_indexes: ['{{ data.number }}'] } })
  t.equal(res.status, 201)
  await app.request('POST', '/tokens', { key, body: { type: 'card', data: { ...card(SENTINEL), number: '4000056655665557' } } })
  await app.request('POST', '/detokenize', { key, body: { x: `{{ ${res.body.id} }}` } })
  await app.request('POST', '/tokens', { key, body: { type: 'card', data: { ...card(SENTINEL), number: 'bad' + SENTINEL } } })
  t.ok(lines.length > 3, 'the app logged requests')
  const dump = JSON.stringify(await Promise.all(['tokens', 'meta', 'applications', 'tenants'].map((table) => app.services.store.db.knex(table).select('*'))))
  t.notOk(dump.includes(SENTINEL), 'the sentinel is in no table')
  t.notOk(dump.includes(Buffer.from(SENTINEL).toString('base64')), 'not even base64-encoded')
  t.notOk(lines.join('').includes(SENTINEL), 'nor in any log line')
})

t.test('a ciphertext moved to another row fails to decrypt', async (t) => {
  const app = await startTestApp(t)
  const key = await appKey(app, { type: 'private', rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:create', 'token:read'] }] })
  const a = await app.request('POST', '/tokens', { key, body: { type: 'token', data: 'alpha' } })
  const b = await app.request('POST', '/tokens', { key, body: { type: 'token', data: 'beta' } })
  const knex = app.services.store.db.knex
  const rowA = await knex('tokens').where({ id: a.body.id }).first()
  await knex('tokens').where({ id: b.body.id }).update({ ciphertext: rowA.ciphertext, encrypted_key: rowA.encrypted_key, key_id: rowA.key_id })
  const moved = await app.request('GET', `/tokens/${b.body.id}`, { key })
  t.equal(moved.status, 500)
  t.notMatch(moved.text, /alpha/)
  t.equal((await app.request('GET', `/tokens/${a.body.id}`, { key })).body.data, 'alpha', 'the original still reads')
})

t.test('a wrong master key: token routes 503, readyz says so, nothing written', async (t) => {
  const first = await startTestApp(t, {}, { persistent: true })
  const key = await appKey(first, { type: 'private', permissions: ['token:create', 'token:read'] })
  const tok = await first.request('POST', '/tokens', { key, body: { type: 'token', data: 'x' } })
  t.equal(tok.status, 201)
  await first.close()

  const wrong = await startTestApp(t, { SVC_MASTER_KEY: newKey('k1') }, { reuse: first })
  t.equal((await wrong.request('GET', `/tokens/${tok.body.id}`, { key })).status, 503)
  const create = await wrong.request('POST', '/tokens', { key, body: { type: 'token', data: 'y' } })
  t.equal(create.status, 503)
  t.equal(create.body.status, 503)
  const ready = await wrong.request('GET', '/readyz', { key: null })
  t.equal(ready.status, 503)
  t.equal(ready.body.components.vault, 'down')
  t.equal((await wrong.request('GET', '/applications/key', { key })).status, 403, 'other routes keep working')
  await wrong.close()

  const right = await startTestApp(t, { SVC_MASTER_KEY: first.config.masterKey! }, { reuse: first })
  t.equal((await right.request('GET', `/tokens/${tok.body.id}`, { key })).status, 200, 'the right key still opens: nothing was written with the wrong one')
  t.equal((await right.request('GET', '/tokens', { key })).body.pagination.total_items, 1)
})

t.test('rotation: rewrap under concurrent reads, then the old key can go', async (t) => {
  const oldKey = newKey('k1')
  const nextKey = newKey('k2')
  // Servers first learn the new key (here: both keys, old still primary), then rewrap runs beside them.
  const app = await startTestApp(t, { SVC_MASTER_KEY: `${oldKey},${nextKey}` }, { persistent: true })
  const key = await appKey(app, { type: 'private', rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:create', 'token:read'] }] })
  const ids: string[] = []
  for (let i = 0; i < 30; i++) ids.push((await app.request('POST', '/tokens', { key, body: { type: 'token', data: `v${i}`, search_indexes: ['{{ data }}'] } })).body.id)
  const rotated = parseKeyring(`${nextKey},${oldKey}`)
  let reading = true
  const reads = (async () => {
    let ok = 0
    while (reading) {
      const i = ok % ids.length
      const res = await app.request('GET', `/tokens/${ids[i]}`, { key })
      if (res.status !== 200 || res.body.data !== `v${i}`) throw new Error(`read failed during rotation: ${res.status}`)
      ok++
    }
    return ok
  })()
  const progress = await rewrapAll(app.services.store, rotated, { batchSize: 7 })
  reading = false
  t.ok((await reads) > 0, 'reads kept succeeding during the rewrap')
  t.equal(progress.rewrapped, 30)
  t.equal((await rewrapAll(app.services.store, rotated)).rewrapped, 0, 'running it again finds nothing left')
  const keyIds = await app.services.store.db.knex('tokens').distinct('key_id')
  t.same(keyIds.map((r: { key_id: string }) => r.key_id), ['k2'])
  await app.close()

  const onlyNew = await startTestApp(t, { SVC_MASTER_KEY: nextKey }, { reuse: app })
  for (const [i, id] of ids.entries()) t.equal((await onlyNew.request('GET', `/tokens/${id}`, { key })).body.data, `v${i}`)
  // A data: term is an equality test: the searching key must see the data at least masked (read too).
  const search = await onlyNew.request('POST', '/tokens/search', { key: await appKey(onlyNew, { type: 'private', permissions: ['token:search', 'token:read'] }), body: { query: 'data:v7' } })
  t.equal(search.body.pagination.total_items, 1, 'fingerprints and search hashes survive rotation')
})
