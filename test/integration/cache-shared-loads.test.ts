import t from 'tap'
import { startTestApp } from '../helpers/app.js'
import { appKey } from '../helpers/tokens.js'

const OPERATOR_KEY = 'operator-key-0123456789abcdef0123456789'

/**
 * Concurrent misses of a cache key share one load (src/cache/invalidating-cache.ts), so a load
 * may read nothing the key does not name: a Reactor looked up by id within the caller's tenant
 * is cached by tenant and id. Keyed by id alone, another tenant's call to the same id, still
 * loading, answered the owner's own call 404.
 */
t.test("another tenant's call to a Reactor id does not answer the owner's call", async (t) => {
  const app = await startTestApp(t, { SVC_OPERATOR_KEY: OPERATOR_KEY })
  const reactor = await app.request('POST', '/reactors', { body: { name: 'r', code: 'module.exports = async () => ({ raw: "ok" })' } })
  t.equal(reactor.status, 201, reactor.text)
  const owner = await appKey(app, { type: 'private', permissions: ['token:use'] })
  const other = await app.request('POST', '/tenants', { key: OPERATOR_KEY, body: { name: 'acme' } })
  t.equal(other.status, 201, other.text)
  const stranger = await app.request('POST', '/applications', { key: other.body.application.key, body: { name: 's', type: 'private', permissions: ['token:use'] } })
  t.equal(stranger.status, 201, stranger.text)

  // The stranger's load waits until the owner's call has missed too.
  const reactors = app.services.store.reactors
  const findById = reactors.findById
  let release!: () => void
  const gate = new Promise<void>((resolve) => (release = resolve))
  reactors.findById = async (tenantId, id) => {
    if (tenantId === other.body.tenant.id) await gate
    return findById(tenantId, id)
  }
  t.teardown(() => void (reactors.findById = findById))
  const react = (key: string) => app.request('POST', `/reactors/${reactor.body.id}/react`, { key, body: { args: {} } })
  const strangers = react(stranger.body.key)
  await new Promise((resolve) => setTimeout(resolve, 50))
  const owners = react(owner)
  await new Promise((resolve) => setTimeout(resolve, 50))
  release()
  t.equal((await strangers).status, 404, 'another tenant\'s Reactor reads as missing')
  const answered = await owners
  t.equal(answered.status, 200, answered.text)
})
