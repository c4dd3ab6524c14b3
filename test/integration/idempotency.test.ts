import { createHash, randomUUID } from 'node:crypto'
import pg from 'pg'
import t from 'tap'
import { idempotencyService } from '../../src/idempotency/service.js'
import { startTestApp, type TestApp } from '../helpers/app.js'
import { appKey, card, VISA } from '../helpers/tokens.js'

const idem = (key: string) => ({ 'SVC-IDEMPOTENCY-KEY': key })

/** The tenant and the fingerprint of a request of `key`, so a test can hold a claim the way another process would. */
async function claimOf(app: TestApp, key: string, path: string, body: string) {
  const principal = await app.services.authenticator.authenticate(key)
  return { tenantId: principal.tenantId, fingerprint: app.services.idempotency.fingerprint(principal.id, 'POST', path, '', Buffer.from(body)) }
}

async function storedRow(app: TestApp, key: string) {
  return app.services.store.db.knex('idempotency_keys').where({ key }).first()
}

t.test('idempotency keys', async (t) => {
  const operatorKey = `op_${randomUUID()}${randomUUID()}`
  const app = await startTestApp(t, { SVC_OPERATOR_KEY: operatorKey })
  const writer = await appKey(app, { type: 'private', rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:create', 'token:read', 'token:search', 'token:update'] }] })

  t.test('a create that returned a key replays without it, and runs once', async (t) => {
    const body = { name: 'idempotent app', type: 'private', permissions: ['token:read'] }
    const first = await app.request('POST', '/applications', { body, headers: idem('create-app-1') })
    t.equal(first.status, 201)
    t.match(first.body.key, /^tsr_priv_/)
    const again = await app.request('POST', '/applications', { body, headers: idem('create-app-1') })
    t.equal(again.status, 201, 'the first status')
    t.equal(again.headers.get('svc-idempotent-replayed'), 'true')
    t.equal(again.body.id, first.body.id, 'the same Application')
    t.notOk('key' in again.body, 'the key is never handed out again')
    const { key: _key, ...withoutKey } = first.body
    t.same(again.body, withoutKey, 'otherwise the first answer')
    const list = await app.request('GET', '/applications?size=100')
    t.equal(list.body.data.filter((a: { name: string }) => a.name === 'idempotent app').length, 1, 'created once')
    t.notMatch((await storedRow(app, 'create-app-1')).body, first.body.key, 'the key is not stored')
    t.equal((await app.request('GET', '/tokens', { key: first.body.key })).status, 200, 'the first key works')
  })

  t.test('regenerate replays without the key and does not regenerate again', async (t) => {
    const created = await app.request('POST', '/applications', { body: { name: 'regen', type: 'private', permissions: ['token:read'] } })
    const regen = await app.request('POST', `/applications/${created.body.id}/regenerate`, { headers: idem('regen-1') })
    t.equal(regen.status, 200)
    const again = await app.request('POST', `/applications/${created.body.id}/regenerate`, { headers: idem('regen-1') })
    t.equal(again.status, 200)
    t.notOk('key' in again.body)
    t.equal((await app.request('GET', '/tokens', { key: regen.body.key })).status, 200, 'the key of the first answer still works')
  })

  t.test('token data never stored nor replayed', async (t) => {
    const body = { type: 'card', data: card(), metadata: { order: '7' } }
    const first = await app.request('POST', '/tokens', { key: writer, body, headers: idem('tok-1') })
    t.equal(first.status, 201)
    t.same(first.body.data, card(), 'the first answer reveals (the rule says so)')
    const again = await app.request('POST', '/tokens', { key: writer, body, headers: idem('tok-1') })
    t.equal(again.status, 201)
    t.equal(again.body.id, first.body.id)
    t.notOk('data' in again.body, 'the replay has no data')
    t.same(again.body.metadata, { order: '7' })
    t.notMatch(JSON.stringify(await storedRow(app, 'tok-1')), VISA, 'no plaintext in the stored answer')
    const patched = await app.request('PATCH', `/tokens/${first.body.id}`, { key: writer, body: { metadata: { order: '8' } }, headers: { ...idem('patch-1'), 'content-type': 'application/merge-patch+json' } })
    const patchedAgain = await app.request('PATCH', `/tokens/${first.body.id}`, { key: writer, body: { metadata: { order: '8' } }, headers: { ...idem('patch-1'), 'content-type': 'application/merge-patch+json' } })
    t.equal(patched.body.data.number, VISA)
    t.same([patchedAgain.status, patchedAgain.body.metadata, 'data' in patchedAgain.body], [200, { order: '8' }, false])
  })

  t.test('a session key is not replayed', async (t) => {
    const publicKey = await appKey(app, { type: 'public', permissions: ['token:create'] })
    const first = await app.request('POST', '/sessions', { key: publicKey, headers: idem('session-1') })
    t.equal(first.status, 201)
    t.ok(first.body.session_key)
    const again = await app.request('POST', '/sessions', { key: publicKey, headers: idem('session-1') })
    t.same(again.body, { expires_at: first.body.expires_at }, 'nor the nonce that authorizes it')
    t.notOk(JSON.stringify(await storedRow(app, 'session-1')).includes(first.body.nonce), 'the nonce is not in the table')
  })

  t.test('what a repeat must match is a keyed hash: guessing the body against the table finds nothing', async (t) => {
    const body = JSON.stringify({ type: 'card_number', data: VISA })
    const created = await app.request('POST', '/tokens', { key: writer, rawBody: body, headers: { ...idem('at-rest-1'), 'content-type': 'application/json' } })
    t.equal(created.status, 201)
    const row = await storedRow(app, 'at-rest-1')
    const principal = await app.services.authenticator.authenticate(writer)
    const unkeyed = createHash('sha256').update(JSON.stringify([principal.id, 'POST', '/tokens', ''])).update(body).digest('hex')
    t.not(row.fingerprint, unkeyed, 'not the plain SHA-256 of the known parts and the body')
    t.equal(row.fingerprint, app.services.idempotency.fingerprint(principal.id, 'POST', '/tokens', '', Buffer.from(body)), 'the keyed one')
    t.notOk(JSON.stringify(row).includes(VISA), 'no card number in the row')
  })

  t.test('the same key with another request is 422', async (t) => {
    await app.request('POST', '/tokens', { key: writer, body: { type: 'token', data: 'a' }, headers: idem('mismatch-1') })
    const other = await app.request('POST', '/tokens', { key: writer, body: { type: 'token', data: 'b' }, headers: idem('mismatch-1') })
    t.equal(other.status, 422)
    t.match(other.body, { type: '/problems/idempotency-mismatch', status: 422 })
    t.equal(other.headers.get('content-type'), 'application/problem+json')
    const otherPath = await app.request('POST', '/tokenize', { key: writer, body: { type: 'token', data: 'a' }, headers: idem('mismatch-1') })
    t.equal(otherPath.status, 422, 'another route')
    const otherCaller = await appKey(app, { type: 'private', permissions: ['token:create'] })
    const stolen = await app.request('POST', '/tokens', { key: otherCaller, body: { type: 'token', data: 'a' }, headers: idem('mismatch-1') })
    t.equal(stolen.status, 422, 'another Application of the tenant never gets the answer')
  })

  t.test('token ids are case-sensitive: the same key on another id\'s path is 422, not its replay', async (t) => {
    for (const id of ['Case-Token', 'case-token']) t.equal((await app.request('POST', '/tokens', { key: writer, body: { id, type: 'token', data: id } })).status, 201)
    const patch = (id: string) =>
      app.request('PATCH', `/tokens/${id}`, { key: writer, rawBody: '{"metadata":{"touched":"yes"}}', headers: { 'content-type': 'application/merge-patch+json', ...idem('case-1') } })
    t.equal((await patch('Case-Token')).status, 200)
    const other = await patch('case-token')
    t.equal(other.status, 422)
    t.notOk(other.headers.get('svc-idempotent-replayed'))
    t.same((await app.request('GET', '/tokens/case-token', { key: writer })).body.metadata, {}, 'the other token is untouched')
  })

  t.test('keys are per tenant', async (t) => {
    const made = await app.request('POST', '/tenants', { key: operatorKey, body: { name: 'second tenant' } })
    t.equal(made.status, 201)
    const body = { name: 'same name', type: 'management', permissions: ['application:read'] }
    const a = await app.request('POST', '/applications', { body, headers: idem('shared-key') })
    const b = await app.request('POST', '/applications', { key: made.body.application.key, body, headers: idem('shared-key') })
    t.same([a.status, b.status], [201, 201])
    t.not(a.body.id, b.body.id)
    t.ok(b.body.key, 'the second tenant ran its own request')
  })

  t.test('a duplicate while the first is in flight is 409 at once; a claim whose process died is taken over', async (t) => {
    const body = JSON.stringify({ type: 'token', data: 'in flight' })
    const { tenantId, fingerprint } = await claimOf(app, writer, '/tokens', body)
    // Another process holds the key: claimed, not completed.
    t.ok(await app.services.store.idempotency.claim({ tenantId, key: 'flight-1', fingerprint, owner: randomUUID(), leaseSeconds: 120, ttlSeconds: 60 }))
    const dup = await app.request('POST', '/tokens', { key: writer, rawBody: body, headers: { ...idem('flight-1'), 'content-type': 'application/json' } })
    t.equal(dup.status, 409)
    t.match(dup.body, { type: '/problems/idempotency-in-flight' })
    t.equal(dup.headers.get('retry-after'), '1')
    await app.services.store.db.knex('idempotency_keys').where({ key: 'flight-1' }).update({ lease_until: new Date(Date.now() - 1000) })
    const retry = await app.request('POST', '/tokens', { key: writer, rawBody: body, headers: { ...idem('flight-1'), 'content-type': 'application/json' } })
    t.equal(retry.status, 201, 'the lease ended: the retry runs')
    t.equal((await storedRow(app, 'flight-1')).status, 201)
  })

  t.test('concurrent duplicates: one runs, the others are 409 or its replay', async (t) => {
    const body = { name: 'raced', type: 'private', permissions: ['token:read'] }
    const answers = await Promise.all(Array.from({ length: 8 }, () => app.request('POST', '/applications', { body, headers: idem('race-1') })))
    const ran = answers.filter((r) => r.status === 201 && r.headers.get('svc-idempotent-replayed') === null)
    t.equal(ran.length, 1, 'exactly one ran')
    t.ok(answers.every((r) => r.status === 409 || r.status === 201), answers.map((r) => r.status).join(','))
    const list = await app.request('GET', '/applications?size=100')
    t.equal(list.body.data.filter((a: { name: string }) => a.name === 'raced').length, 1)
  })

  t.test('a failed request gives its key up', async (t) => {
    const bad = await app.request('POST', '/tokens', { key: writer, body: { type: 'card', data: { number: '1' } }, headers: idem('fail-1') })
    t.equal(bad.status, 400)
    t.notOk(await storedRow(app, 'fail-1'), 'nothing kept')
    const readOnly = await appKey(app, { type: 'private', permissions: ['token:read'] })
    t.equal((await app.request('POST', '/tokens', { key: readOnly, body: { type: 'token', data: 1 }, headers: idem('fail-2') })).status, 403)
    const good = await app.request('POST', '/tokens', { key: writer, body: { type: 'card', data: card() }, headers: idem('fail-1') })
    t.equal(good.status, 201, 'the corrected request runs with the same key')
  })

  t.test('withheld answers are refused on replay, naming the first status', async (t) => {
    const owner = randomUUID()
    // A caller that may react now (one that may not gets the 403 a fresh call gets).
    const user = await appKey(app, { type: 'private', permissions: ['token:use'] })
    const { tenantId, fingerprint } = await claimOf(app, user, '/reactors/x/react', '{}')
    await app.services.store.idempotency.claim({ tenantId, key: 'react-1', fingerprint, owner, leaseSeconds: 120, ttlSeconds: 60 })
    await app.services.store.idempotency.complete(tenantId, 'react-1', owner, { status: 200, body: null, withheld: true })
    const replay = await app.request('POST', '/reactors/x/react', { key: user, rawBody: '{}', headers: { ...idem('react-1'), 'content-type': 'application/json' } })
    t.equal(replay.status, 409)
    t.match(replay.body, { type: '/problems/idempotency-withheld', detail: /status 200/ })
  })

  t.test('a Reactor\'s answer (user code, may hold plaintext) is never stored: a repeat is 409 naming its status', async (t) => {
    const token = await app.request('POST', '/tokens', { key: writer, body: { type: 'card', data: card() } })
    const user = await appKey(app, { type: 'private', rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:use'] }] })
    const reactor = await app.request('POST', '/reactors', { body: { name: 'echo', code: 'module.exports = async (req) => ({ raw: req.args.n })' } })
    const body = { args: { n: `{{ ${token.body.id} | json: '$.number' }}` } }
    const first = await app.request('POST', `/reactors/${reactor.body.id}/react`, { key: user, body, headers: idem('react-e2e') })
    t.same([first.status, first.body.raw], [200, VISA], 'the first answer reveals')
    const again = await app.request('POST', `/reactors/${reactor.body.id}/react`, { key: user, body, headers: idem('react-e2e') })
    t.equal(again.status, 409)
    t.match(again.body, { type: '/problems/idempotency-withheld', detail: /status 200/ })
    t.notMatch(again.text, VISA)
    t.match(await storedRow(app, 'react-e2e'), { status: 200, body: null, withheld: true }, 'only the status is kept')
  })

  t.test('a /tokenize replay has the ids and no data', async (t) => {
    const body = { full: { type: 'card', data: card() }, leaf: VISA }
    const first = await app.request('POST', '/tokenize', { key: writer, body, headers: idem('tokenize-1') })
    t.equal(first.status, 200)
    t.same(first.body.full.data, card())
    const again = await app.request('POST', '/tokenize', { key: writer, body, headers: idem('tokenize-1') })
    t.same([again.status, again.headers.get('svc-idempotent-replayed')], [200, 'true'])
    t.same([again.body.full.id, again.body.leaf], [first.body.full.id, first.body.leaf], 'the same tokens')
    t.notOk('data' in again.body.full, 'no data')
    t.notMatch(again.text, VISA)
    t.notMatch(JSON.stringify(await storedRow(app, 'tokenize-1')), VISA, 'nor in the stored answer')
  })

  t.test('expired keys can be reused and are pruned', async (t) => {
    await app.request('POST', '/tokens', { key: writer, body: { type: 'token', data: 'old' }, headers: idem('old-1') })
    await app.services.store.db.knex('idempotency_keys').where({ key: 'old-1' }).update({ expires_at: new Date(Date.now() - 1000) })
    const reused = await app.request('POST', '/tokens', { key: writer, body: { type: 'token', data: 'new' }, headers: idem('old-1') })
    t.equal(reused.status, 201, 'an expired key is free, whatever it was used for')
    t.notOk(reused.headers.get('svc-idempotent-replayed'))
    await app.services.store.db.knex('idempotency_keys').where({ key: 'old-1' }).update({ expires_at: new Date(Date.now() - 1000) })
    t.ok((await app.services.idempotency.pruneExpired()) >= 1)
    t.notOk(await storedRow(app, 'old-1'), 'pruned')
  })

  t.test('where the header does not apply, and a malformed key', async (t) => {
    const a = await app.request('POST', '/tokens/search', { key: writer, body: { query: 'type:card' }, headers: idem('read-1') })
    const b = await app.request('POST', '/tokens/search', { key: writer, body: { query: 'type:token' }, headers: idem('read-1') })
    t.same([a.status, b.status], [200, 200], 'searches are reads: the header is ignored')
    t.equal((await app.request('GET', '/tokens', { key: writer, headers: idem('read-1') })).status, 200)
    const long = await app.request('POST', '/tokens', { key: writer, body: { type: 'token', data: 1 }, headers: idem('x'.repeat(256)) })
    t.equal(long.status, 400)
    t.ok(long.body.errors['SVC-IDEMPOTENCY-KEY'])
    const big = await app.request('POST', '/tokens', { key: writer, rawBody: JSON.stringify({ type: 'token', data: 'x'.repeat(6 * 1024 * 1024) }), headers: { ...idem('big-1'), 'content-type': 'application/json' } })
    t.equal(big.status, 413, 'the body limit holds')
  })
})

// Two Tessera processes on one Postgres: the claim is the database's, so one key runs once in all.
t.test('across processes: one runs, the other gets 409 or the replay', { skip: process.env.DATABASE_URL ? false : 'needs DATABASE_URL (PGlite is one process)' }, async (t) => {
  const a = await startTestApp(t)
  const b = await startTestApp(t, {}, { reuse: a })
  const body = { name: 'two processes', type: 'private', permissions: ['token:read'] }
  const answers = await Promise.all(Array.from({ length: 6 }, (_, i) => (i % 2 ? a : b).request('POST', '/applications', { body, headers: idem('cross-1') })))
  t.equal(answers.filter((r) => r.status === 201 && r.headers.get('svc-idempotent-replayed') === null).length, 1, 'exactly one ran')
  t.ok(answers.every((r) => r.status === 201 || r.status === 409), answers.map((r) => r.status).join(','))
  const replay = await b.request('POST', '/applications', { body, headers: idem('cross-1') })
  t.same([replay.status, replay.headers.get('svc-idempotent-replayed'), 'key' in replay.body], [201, 'true', false], 'the other process replays')
  const list = await a.request('GET', '/applications?size=100')
  t.equal(list.body.data.filter((x: { name: string }) => x.name === 'two processes').length, 1)
})

t.test('a claim is renewed while its request runs, however long: a retry past the lease does not run it again', async (t) => {
  // The review's probe: a request held 121 s by a locked table, past the 120 s lease; the retry claimed the key and both made an Application.
  const app = await startTestApp(t)
  const tenantId = (await app.request('GET', '/tenants/self')).body.id as string
  const service = idempotencyService(app.services.store, { ttlSeconds: 60, leaseSeconds: 1, secret: 'a'.repeat(64) })
  const first = await service.begin(tenantId, 'renew-1', 'fp')
  t.equal(first.kind, 'run')
  await new Promise((resolve) => setTimeout(resolve, 2_500))
  await t.rejects(service.begin(tenantId, 'renew-1', 'fp'), { code: 'idempotency_in_flight' }, 'two leases later the claim still holds')
  if (first.kind === 'run') await first.complete({ status: 201, body: '{}', withheld: false })
  t.match(await service.begin(tenantId, 'renew-1', 'fp'), { kind: 'replay', status: 201 })
  await new Promise((resolve) => setTimeout(resolve, 1_000))
  t.equal((await storedRow(app, 'renew-1')).status, 201, 'a completed claim is no longer renewed (nor overwritten)')
})

t.test('renewal runs while the requests fill the pool: another process does not take the claim over', { skip: process.env.DATABASE_URL ? false : 'needs DATABASE_URL (two processes, a locked table)' }, async (t) => {
  // The review's probe: requests waiting on a locked table filled the pool, the renewal could not get a connection, and a retry on another process ran the request a second time.
  const a = await startTestApp(t, { SVC_DB_POOL_MAX: '2', SVC_DB_STATEMENT_TIMEOUT_MS: '60000' })
  const b = await startTestApp(t, {}, { reuse: a })
  const tenantId = (await a.request('GET', '/tenants/self')).body.id as string
  const key = await appKey(a, { type: 'private', permissions: ['token:create'] })
  const serviceOf = (app: TestApp) => idempotencyService(app.services.store, { ttlSeconds: 60, leaseSeconds: 1, secret: 'a'.repeat(64) })
  const first = await serviceOf(a).begin(tenantId, 'pool-1', 'fp')
  const locker = new pg.Client({ connectionString: process.env.DATABASE_URL, options: `-c search_path=${a.schema}` })
  await locker.connect()
  t.teardown(() => locker.end())
  await locker.query('begin')
  await locker.query('lock table tokens in access exclusive mode')
  const blocked = [0, 1].map((i) => a.request('POST', '/tokens', { key, body: { type: 'token', data: `blocked ${i}` } }))
  await new Promise((resolve) => setTimeout(resolve, 3_000))
  await t.rejects(serviceOf(b).begin(tenantId, 'pool-1', 'fp'), { code: 'idempotency_in_flight' }, 'three leases later, with the pool full, the claim still holds')
  await locker.query('rollback')
  t.same((await Promise.all(blocked)).map((r) => r.status), [201, 201])
  if (first.kind === 'run') await first.release()
})

