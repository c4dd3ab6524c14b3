import t from 'tap'
import { startTestApp } from '../helpers/app.js'
import { rawRequest } from '../helpers/proxy.js'
import { appKey } from '../helpers/tokens.js'
import { startStub } from '../helpers/stub-server.js'
import { eventually } from '../helpers/wait.js'

// Two Tessera processes on one Postgres: a proxy cached by one must follow changes made through the other.
t.test('pre-configured proxies: changes in one process take effect at once in another', { skip: process.env.DATABASE_URL ? false : 'needs DATABASE_URL (PGlite is one process)' }, async (t) => {
  const a = await startTestApp(t)
  const b = await startTestApp(t, {}, { reuse: a })
  const first = await startStub(t)
  const second = await startStub(t)
  const writer = await appKey(a, { type: 'private', permissions: ['token:create'] })
  const tok = await a.request('POST', '/tokens', { key: writer, body: { type: 'token', data: 'secret' } })
  const actor = await a.request('POST', '/applications', {
    body: { name: 'actor', type: 'private', rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: ['token:use'] }] },
  })
  const created = await a.request('POST', '/proxies', { body: { name: 'p', destination_url: first.origin, require_auth: false, application: { id: actor.body.id } } })
  t.equal(created.status, 201)
  const call = () => rawRequest(b.url, { method: 'POST', path: '/proxy/x', body: `{"v":"{{ ${tok.body.id} }}"}`, headers: ['SVC-PROXY-KEY', created.body.key, 'Content-Type', 'application/json'] })

  t.equal((await call()).status, 200, 'b resolves (and caches) the proxy')
  t.equal(first.seen.at(-1)!.body.toString(), '{"v":"secret"}')

  const moved = await a.request('PUT', `/proxies/${created.body.id}`, { body: { name: 'p', destination_url: second.origin, require_auth: false, application: { id: actor.body.id } } })
  t.equal(moved.status, 200)
  // Each change reaches b by NOTIFY on b's own connection: the checks wait for it (up to 5 s).
  t.equal((await eventually(call, () => second.seen.length > 0)).status, 200)
  t.equal(second.seen.length, 1, 'b forwards to the new destination')

  await a.request('PUT', `/applications/${actor.body.id}`, {
    body: { name: 'actor', rules: [{ priority: 1, container: '/pci/', transform: 'reveal', permissions: ['token:use'] }] },
  })
  t.equal((await eventually(call, (res) => res.status !== 200)).status, 403, "b acts with the Application's new rules")

  await a.request('DELETE', `/proxies/${created.body.id}`)
  t.equal((await eventually(call, (res) => res.status !== 403)).status, 401, 'the deleted proxy\'s key is refused by b')
})
