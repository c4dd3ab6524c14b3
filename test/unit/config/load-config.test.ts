import t from 'tap'
import { ConfigError, loadConfig } from '../../../src/config/index.js'

t.test('defaults follow API.md', async (t) => {
  const c = loadConfig({})
  t.equal(c.port, 3000)
  t.equal(c.host, '127.0.0.1')
  t.equal(c.dataDir, './data')
  t.equal(c.bodyLimitBytes, 5_242_880)
  t.equal(c.proxy.timeoutMs, 25_000)
  t.equal(c.reactors.timeoutMs, 30_000)
  t.equal(c.reactors.memoryMb, 128)
  t.equal(c.reactors.hotConcurrency, 1)
  t.same(c.rateLimit.scopes.global, { limit: 1000, windowSeconds: 10 })
  t.same(c.rateLimit.scopes.tokens_search, { limit: 50, windowSeconds: 10 })
  t.equal(c.rateLimit.blockSeconds, 10)
  t.equal(c.databaseUrl, undefined)
  t.ok(Object.isFrozen(c) && Object.isFrozen(c.rateLimit.scopes), 'frozen')
})

t.test('values are coerced and validated', async (t) => {
  const c = loadConfig({ PORT: '8080', SVC_PROXY_ALLOW_HTTP: 'true', SVC_RATE_LIMIT_GLOBAL: '5/2', SVC_TRUSTED_PROXIES: '10.0.0.0/8, 127.0.0.1' })
  t.equal(c.port, 8080)
  t.equal(c.proxy.allowHttp, true)
  t.same(c.rateLimit.scopes.global, { limit: 5, windowSeconds: 2 })
  t.same(c.rateLimit.trustedProxies, ['10.0.0.0/8', '127.0.0.1'])
})

t.test('every bad variable is reported at once', async (t) => {
  const err = t.throws(() =>
    loadConfig({ PORT: 'abc', SVC_RATE_LIMIT_GLOBAL: 'lots', DATABASE_URL: 'mysql://x', SVC_PROXY_ALLOW_HTTP: 'maybe' }),
  ) as ConfigError
  t.type(err, ConfigError)
  const text = err.message
  for (const name of ['PORT', 'SVC_RATE_LIMIT_GLOBAL', 'DATABASE_URL', 'SVC_PROXY_ALLOW_HTTP']) t.match(text, name)
})
