import t from 'tap'
import { startTestApp } from '../helpers/app.js'
import { testClock } from '../helpers/clock.js'
import { appKey } from '../helpers/tokens.js'
import { countQueries } from '../helpers/audit.js'

t.test('detokenization: one query for uncached tokens, none when cached, changes seen at once', async (t) => {
  const app = await startTestApp(t)
  const key = await appKey(app, {
    type: 'private',
    rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:create', 'token:read', 'token:update', 'token:delete'] }],
  })
  const ids: string[] = []
  for (let i = 0; i < 5; i++) ids.push((await app.request('POST', '/tokens', { key, body: { type: 'token', data: `v${i}` } })).body.id)
  const body = Object.fromEntries(ids.map((id, i) => [`k${i}`, `{{ ${id} }}`]))
  const queries = countQueries(t, app)

  const detok = () => app.request('POST', '/detokenize', { key, body })
  const before = queries()
  t.same((await detok()).body, { k0: 'v0', k1: 'v1', k2: 'v2', k3: 'v3', k4: 'v4' })
  t.equal(queries() - before, 1, 'five tokens, one query (besides the audit log\'s batch)')
  const cached = queries()
  t.same((await detok()).body.k0, 'v0')
  t.equal(queries() - cached, 0, 'served from the cache')

  const patched = await app.request('PATCH', `/tokens/${ids[0]}`, { key, body: { data: 'changed' }, headers: { 'content-type': 'application/merge-patch+json' } })
  t.equal(patched.status, 200)
  t.equal((await detok()).body.k0, 'changed', 'an update is seen at once')
  t.equal((await app.request('DELETE', `/tokens/${ids[1]}`, { key })).status, 204)
  t.equal((await detok()).status, 400, 'a deleted token is unknown at once')
})

t.test('an expiring token leaves the cache when it expires', async (t) => {
  const clock = testClock()
  const app = await startTestApp(t, {}, { clock })
  const key = await appKey(app, { type: 'private', permissions: ['token:create', 'token:read'] })
  // Sooner than the cache's 30 s TTL: the token's own expiry is what ends the entry.
  const until = new Date(clock() + 20_000).toISOString()
  const tok = await app.request('POST', '/tokens', { key, body: { type: 'token', data: 'short', expires_at: until } })
  const detok = () => app.request('POST', '/detokenize', { key, body: { x: `{{ ${tok.body.id} }}` } })
  t.equal((await detok()).status, 200)
  const queries = countQueries(t, app)
  clock.advance(19_000)
  t.equal((await detok()).status, 200, 'still there a second before')
  t.equal(queries(), 0, 'from the cache')
  clock.advance(1_000)
  t.equal((await app.request('POST', '/detokenize', { key, body: { x: `{{ ${tok.body.id} }}` } })).status, 400)
})

t.test('a cached token that leaves the cache while a request waits for another token still opens', async (t) => {
  const clock = testClock()
  const app = await startTestApp(t, {}, { clock })
  const key = await appKey(app, { type: 'private', rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:create', 'token:read'] }] })
  const create = async (data: string) => (await app.request('POST', '/tokens', { key, body: { type: 'token', data } })).body.id as string
  const [cached, uncached] = [await create('in the cache'), await create('loaded')]
  t.equal((await app.request('POST', '/detokenize', { key, body: { x: `{{ ${cached} }}` } })).status, 200)
  const principal = await app.services.authenticator.authenticate(key)
  // Takes `cached` from the cache, then waits for the query that loads `uncached`...
  const both = app.services.tokens.resolve(principal, new Set([cached, uncached]), 'token:read')
  // ...meanwhile the entry outlives its TTL and another request's look-up drops it (wiping its data key).
  clock.advance(31_000)
  const alone = await app.services.tokens.resolve(principal, new Set([cached]), 'token:read')
  t.equal(alone(cached), 'in the cache')
  const lookup = await both
  t.equal(lookup(cached), 'in the cache', 'the waiting request opens it with an intact key')
  t.equal(lookup(uncached), 'loaded')
})

// The database decides with the creating process's clock that an expired token's id is free;
// another process whose clock has not reached that expiry still holds the old token in its
// cache and must drop it when the new one takes the id (NOTIFY, read from its own connection).
t.test('a token that takes an expired token\'s id replaces it in every process\'s cache', { skip: process.env.DATABASE_URL ? false : 'needs DATABASE_URL (PGlite is one process)' }, async (t) => {
  const clock = testClock()
  const ahead = await startTestApp(t, {}, { clock })
  const behind = await startTestApp(t, {}, { reuse: ahead })
  const rules = [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:create', 'token:read'] }]
  const key = await appKey(ahead, { type: 'private', rules })
  const until = () => new Date(clock() + 20_000).toISOString()
  const detokenize = async (id: string) => (await behind.request('POST', '/detokenize', { key, body: { x: `{{ ${id} }}` } })).body.x as unknown
  const eventually = async (id: string, want: string) => {
    const deadline = Date.now() + 5000
    let seen = await detokenize(id)
    while (seen !== want && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20))
      seen = await detokenize(id)
    }
    return seen
  }

  for (const [route, created, create] of [
    ['POST /tokens', 201, (id: string, data: string) => ahead.request('POST', '/tokens', { key, body: { id, type: 'token', data, expires_at: until() } })],
    ['POST /tokenize', 200, (id: string, data: string) => ahead.request('POST', '/tokenize', { key, body: { t: { id, type: 'token', data, expires_at: until() } } })],
  ] as const) {
    const id = `reused-${route.replace(/\W/g, '')}`
    t.equal((await create(id, 'old')).status, created)
    t.equal(await detokenize(id), 'old', `${route}: the other process caches the token`)
    clock.advance(30_000)
    t.equal((await create(id, 'new')).status, created, `${route}: expired on the creating process's clock`)
    t.equal(await eventually(id, 'new'), 'new', `${route}: the other process drops the old token`)
  }
})
