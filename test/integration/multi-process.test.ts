import t from 'tap'
import { startTestApp } from '../helpers/app.js'
import { appKey } from '../helpers/tokens.js'
import { eventually } from '../helpers/wait.js'

// Two Tessera processes on one Postgres: caches in one must never serve what the other changed.
// A change reaches the other process by NOTIFY on its own connection, so each check waits for
// that (up to 5 s) rather than racing it.
t.test('changes in one process take effect at once in another', { skip: process.env.DATABASE_URL ? false : 'needs DATABASE_URL (PGlite is one process)' }, async (t) => {
  const a = await startTestApp(t)
  const b = await startTestApp(t, {}, { reuse: a })
  const key = await appKey(a, {
    type: 'private',
    rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:create', 'token:read', 'token:update', 'token:use'] }],
  })
  const mgmt = await a.request('POST', '/applications', { body: { name: 'm', type: 'management', permissions: ['application:read'] } })

  // Warm both processes' caches.
  t.equal((await b.request('GET', '/applications/key', { key: mgmt.body.key })).status, 200)
  const tok = await a.request('POST', '/tokens', { key, body: { type: 'token', data: 'before' } })
  const detok = () => b.request('POST', '/detokenize', { key, body: { x: `{{ ${tok.body.id} }}` } })
  t.equal((await detok()).body.x, 'before')

  const regen = await a.request('POST', `/applications/${mgmt.body.id}/regenerate`)
  const status = (key: string) => async () => (await b.request('GET', '/applications/key', { key })).status
  t.equal(await eventually(status(mgmt.body.key), (s) => s !== 200), 401, 'old key refused by the other process')
  t.equal((await b.request('GET', '/applications/key', { key: regen.body.key })).status, 200)
  await a.request('DELETE', `/applications/${mgmt.body.id}`)
  t.equal(await eventually(status(regen.body.key), (s) => s !== 200), 401, 'deleted key refused by the other process')

  await a.request('PATCH', `/tokens/${tok.body.id}`, { key, body: { data: 'after' }, headers: { 'content-type': 'application/merge-patch+json' } })
  t.equal((await eventually(detok, (res) => res.body.x !== 'before')).body.x, 'after', 'token update seen by the other process')

  await a.request('PATCH', '/tenants/self', { rawBody: '{"settings":{"ephemeral_proxy_enabled":false}}', headers: { 'content-type': 'application/merge-patch+json' } })
  const proxied = await eventually(() => b.request('POST', '/proxy', { key, headers: { 'SVC-PROXY-URL': 'http://127.0.0.1:9' }, body: {} }), (res) => res.status === 403)
  t.equal(proxied.status, 403, 'tenant setting seen by the other process')
})
