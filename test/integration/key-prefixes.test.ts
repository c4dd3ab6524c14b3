import t from 'tap'
import { generateApiKey, KEY_PREFIXES } from '../../src/auth/api-keys.js'
import { startTestApp } from '../helpers/app.js'

t.test('each kind of key has its own prefix; keys issued as key_ keep working', async (t) => {
  // The bootstrap key of the test helper is an old-style `key_` key.
  const app = await startTestApp(t)
  t.match(app.adminKey, /^key_/)
  t.equal((await app.request('GET', '/applications/key')).status, 200, 'an old key_ key still authenticates')

  const created: Record<string, string> = {}
  for (const [type, permissions] of [['management', ['application:read']], ['private', ['token:read']], ['public', ['token:create']]] as const) {
    const res = await app.request('POST', '/applications', { body: { name: type, type, permissions } })
    t.equal(res.status, 201)
    t.match(res.body.key, new RegExp(`^${KEY_PREFIXES[type]}[A-Za-z0-9]{43}$`), `${type} key`)
    created[type] = res.body.key
    if (type === 'private') {
      const regen = await app.request('POST', `/applications/${res.body.id}/regenerate`)
      t.match(regen.body.key, /^tsr_priv_/, 'a regenerated key keeps its kind')
      created[type] = regen.body.key
    }
  }
  t.equal((await app.request('GET', '/tokens', { key: created.private! })).status, 200, 'the new keys authenticate')

  const session = await app.request('POST', '/sessions', { key: created.public! })
  t.match(session.body.session_key, /^tsr_sess_[A-Za-z0-9]{43}$/)
  const proxy = await app.request('POST', '/proxies', { body: { name: 'p', destination_url: 'https://api.example.com' } })
  t.match(proxy.body.key, /^tsr_proxy_[A-Za-z0-9]{43}$/)

  // The prefixes tell the kinds apart, and none is a prefix of another.
  const prefixes = Object.values(KEY_PREFIXES)
  for (const a of prefixes) for (const b of prefixes) if (a !== b) t.notOk(b.startsWith(a), `${a} / ${b}`)
})

t.test('SVC_BOOTSTRAP_API_KEY takes the management prefix or the old one', async (t) => {
  const modern = generateApiKey(KEY_PREFIXES.management)
  const app = await startTestApp(t, { SVC_BOOTSTRAP_API_KEY: modern })
  t.equal((await app.request('GET', '/applications/key', { key: modern })).status, 200)
})

t.test('a tenant bootstrapped without SVC_BOOTSTRAP_API_KEY gets a management-prefixed key', async (t) => {
  const operator = 'o'.repeat(40)
  const app = await startTestApp(t, { SVC_OPERATOR_KEY: operator })
  const res = await app.request('POST', '/tenants', { key: operator, body: { name: 'acme' } })
  t.equal(res.status, 201)
  t.match(res.body.application.key, /^tsr_mgmt_[A-Za-z0-9]{43}$/)
})

t.test('private Application and pre-configured proxy keys issued as key_ keep working', async (t) => {
  const before = await startTestApp(t, {}, { persistent: true })
  const priv = await before.request('POST', '/applications', { body: { name: 'old private', type: 'private', permissions: ['token:read', 'token:use'] } })
  const proxy = await before.request('POST', '/proxies', { body: { name: 'old proxy', destination_url: 'http://127.0.0.1:9' } })
  t.equal(priv.status, 201)
  t.equal(proxy.status, 201)
  // As stored before the prefixes: only the hash of a `key_` key.
  const oldPrivate = generateApiKey()
  const oldProxy = generateApiKey()
  const { hasher, store } = before.services
  await store.db.knex('applications').where({ id: priv.body.id }).update({ key_hash: hasher.hash(oldPrivate) })
  await store.db.knex('proxies').where({ id: proxy.body.id }).update({ key_hash: hasher.hash(oldProxy) })
  await before.close()
  // A restart: nothing cached from before the keys were swapped.
  const app = await startTestApp(t, {}, { reuse: before })
  t.equal((await app.request('GET', '/tokens', { key: oldPrivate })).status, 200, 'the old private key authenticates')
  t.equal((await app.request('GET', '/tokens', { key: priv.body.key })).status, 401, 'the key it replaced does not')
  const proxied = await app.request('GET', '/proxy', { key: oldPrivate, headers: { 'SVC-PROXY-KEY': oldProxy } })
  t.equal(proxied.status, 502, 'the old proxy key is accepted (502: the destination itself is closed)')
  // An authenticated caller naming no proxy is a 403 (policies.ts, unknownProxyKey).
  t.equal((await app.request('GET', '/proxy', { key: oldPrivate, headers: { 'SVC-PROXY-KEY': proxy.body.key } })).status, 403, 'the proxy key it replaced is not')
})
