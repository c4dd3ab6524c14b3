import { execFileSync, spawnSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { availableParallelism } from 'node:os'
import t from 'tap'
import { ConfigError, loadConfig, rateScopes } from '../../../src/config/index.js'

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

t.test('the runtime child environment is an allow-list', async (t) => {
  const c = loadConfig({ SVC_MASTER_KEY: `k1:${'A'.repeat(43)}=`, SVC_KEY_HASH_SECRET: 'x'.repeat(40), DATABASE_URL: 'postgres://u:p@h/d', HOME: '/root', PATH: '/bin', TZ: 'UTC', LANG: 'C.UTF-8' })
  t.same(c.reactors.childEnv, { TZ: 'UTC', LANG: 'C.UTF-8' })
})

t.test('IPv6 rate-limit prefix: /64 by default, configurable', async (t) => {
  t.equal(loadConfig({}).rateLimit.ipv6PrefixLength, 64)
  t.equal(loadConfig({ SVC_RATE_LIMIT_IPV6_PREFIX: '56' }).rateLimit.ipv6PrefixLength, 56)
  t.throws(() => loadConfig({ SVC_RATE_LIMIT_IPV6_PREFIX: '129' }), /SVC_RATE_LIMIT_IPV6_PREFIX/)
})

t.test('Reactor worker threads: one per core the process may run on, unless set', async (t) => {
  t.equal(loadConfig({}).reactors.workers, Math.min(64, availableParallelism()))
  t.equal(loadConfig({ SVC_REACTOR_WORKERS: '3' }).reactors.workers, 3)
  t.throws(() => loadConfig({ SVC_REACTOR_WORKERS: '0' }), /SVC_REACTOR_WORKERS/)
  t.throws(() => loadConfig({ SVC_REACTOR_WORKERS: '65' }), /SVC_REACTOR_WORKERS/)
  t.throws(() => loadConfig({ SVC_REACTOR_WORKERS: 'two' }), /SVC_REACTOR_WORKERS/)
  const canPin = availableParallelism() >= 2 && spawnSync('taskset', ['--version'], { stdio: 'ignore' }).status === 0
  t.test('a process pinned to one core gets one worker', { skip: canPin ? false : 'needs taskset and two cores' }, async (t) => {
    const module = new URL('../../../src/config/index.ts', import.meta.url).href
    const script = `const { loadConfig } = await import(${JSON.stringify(module)}); console.log(loadConfig({}).reactors.workers)`
    const out = execFileSync('taskset', ['-c', '0', process.execPath, '--import', 'tsx', '--input-type=module', '-e', script], { encoding: 'utf8', timeout: 30_000 })
    t.equal(out.trim(), '1')
  })
})

t.test('Reactor fairness and warm-pool bounds: defaults, and caps that only make sense in order', async (t) => {
  const c = loadConfig({})
  const halfTheCores = Math.max(1, Math.floor(availableParallelism() / 2))
  t.same(c.reactors.concurrency, { total: 32, perTenant: 16, perReactor: 8, perTenantSlow: Math.min(16, halfTheCores), slowCallMs: 250 })
  t.equal(loadConfig({ SVC_REACTOR_CONCURRENCY_PER_TENANT: '1', SVC_REACTOR_CONCURRENCY_PER_REACTOR: '1' }).reactors.concurrency.perTenantSlow, 1, 'the default never exceeds the tenant cap')
  t.equal(loadConfig({ SVC_REACTOR_CONCURRENCY_PER_TENANT_SLOW: '4' }).reactors.concurrency.perTenantSlow, 4)
  t.throws(() => loadConfig({ SVC_REACTOR_CONCURRENCY_PER_TENANT_SLOW: '17' }), /SVC_REACTOR_CONCURRENCY_PER_TENANT_SLOW \(17\) must not exceed SVC_REACTOR_CONCURRENCY_PER_TENANT \(16\)/)
  t.same(c.reactors.queue, { total: 256, perTenant: 64, timeoutMs: 1000 })
  t.same(c.reactors.warm, { perReactor: 8, total: 64, idleMs: 60_000 })
  const err = t.throws(() =>
    loadConfig({ SVC_REACTOR_CONCURRENCY_PER_REACTOR: '20', SVC_REACTOR_QUEUE_PER_TENANT: '300', SVC_REACTOR_HOT_CONCURRENCY: '9' }),
  ) as ConfigError
  t.same(err.problems, [
    'SVC_REACTOR_CONCURRENCY_PER_REACTOR (20) must not exceed SVC_REACTOR_CONCURRENCY_PER_TENANT (16)',
    'SVC_REACTOR_QUEUE_PER_TENANT (300) must not exceed SVC_REACTOR_QUEUE_TOTAL (256)',
    'SVC_REACTOR_HOT_CONCURRENCY (9) must not exceed SVC_REACTOR_WARM_PER_REACTOR (8)',
  ])
  t.equal(loadConfig({ SVC_REACTOR_HOT_CONCURRENCY: '9', SVC_REACTOR_WARM_PER_REACTOR: '9' }).reactors.hotConcurrency, 9)
})

t.test('structured values are parsed at load: a bad master key or trusted proxy is reported with the rest', async (t) => {
  const err = t.throws(() =>
    loadConfig({ PORT: 'abc', SVC_MASTER_KEY: 'k1:not-base64!,k1:c2hvcnQ=', SVC_TRUSTED_PROXIES: '10.0.0.0/33, 127.0.0.1, proxy.local' }),
  ) as ConfigError
  t.type(err, ConfigError)
  t.match(err.problems, [/^PORT /, /^SVC_MASTER_KEY: entry 1 \(k1\): the key is not valid base64/, /^SVC_MASTER_KEY: entry 2 \(k1\): the key decodes to 5 bytes/, /^SVC_TRUSTED_PROXIES: "10.0.0.0\/33"/, /^SVC_TRUSTED_PROXIES: "proxy.local"/])
  t.equal(err.problems.length, 5)
  t.notMatch(err.message, 'c2hvcnQ', 'no key material in the message')
  const both = t.throws(() => loadConfig({ SVC_REACTOR_QUEUE_PER_TENANT: '300', SVC_TRUSTED_PROXIES: 'proxy.local' })) as ConfigError
  t.same(both.problems, ['SVC_REACTOR_QUEUE_PER_TENANT (300) must not exceed SVC_REACTOR_QUEUE_TOTAL (256)', 'SVC_TRUSTED_PROXIES: "proxy.local" is not an IP address or CIDR'], 'bounds and parsed values together')
  t.doesNotThrow(() => loadConfig({ SVC_MASTER_KEY: `k2:${randomBytes(32).toString('base64')},k1:${randomBytes(32).toString('base64')}`, SVC_TRUSTED_PROXIES: '10.0.0.0/8, ::1' }))
})

t.test('DATABASE_URL and REDIS_URL must parse as URLs, and are never quoted', async (t) => {
  const urls = t.throws(() => loadConfig({ DATABASE_URL: 'postgres://u:secret-pw@127.0.0.1:99999/db', REDIS_URL: 'redis://:secret-pw@[::1:6379' })) as ConfigError
  t.match(urls.problems, [/^DATABASE_URL is not a valid URL/, /^REDIS_URL is not a valid URL/])
  t.notMatch(urls.message, 'secret-pw')
  t.doesNotThrow(() => loadConfig({ DATABASE_URL: 'postgres:///tessera', REDIS_URL: 'rediss://:pw@cache.internal:6380/1' }))
})

t.test('every rate scope has its variable and default, and scope maps list each scope once', async (t) => {
  const c = loadConfig({ SVC_RATE_LIMIT_TOKENS_CREATE: '7/3' })
  t.same(Object.keys(c.rateLimit.scopes), [...rateScopes])
  t.same(c.rateLimit.scopes.tokens_create, { limit: 7, windowSeconds: 3 })
  for (const scope of rateScopes) t.throws(() => loadConfig({ [`SVC_RATE_LIMIT_${scope.toUpperCase()}`]: '0/1' }), new RegExp(`SVC_RATE_LIMIT_${scope.toUpperCase()}`))
})

t.test('a rate is bounded: at most 1,000,000,000 requests per at most 86,400 seconds', async (t) => {
  for (const scope of rateScopes) {
    const name = `SVC_RATE_LIMIT_${scope.toUpperCase()}`
    t.same(loadConfig({ [name]: '1000000000/86400' }).rateLimit.scopes[scope], { limit: 1_000_000_000, windowSeconds: 86_400 }, 'the bounds themselves')
    for (const value of ['5/86401', '1000000001/1', '5/' + '9'.repeat(400), '9'.repeat(400) + '/5']) {
      const err = t.throws(() => loadConfig({ [name]: value }), `${name}=${value.slice(0, 20)}`) as ConfigError
      t.match(err.problems, [`${name} must have a count of at most 1000000000 and a window of at most 86400 seconds`])
    }
  }
})

t.test('a blank value is unset (its default), never a 0', async (t) => {
  for (const blank of ['', ' ', '\t', ' \n ']) {
    const c = loadConfig({ PORT: blank, SVC_SHUTDOWN_GRACE_MS: blank, SVC_RATE_LIMIT_LEASE_PERCENT: blank, SVC_REACTOR_HOT_CONCURRENCY: blank, HOST: blank, SVC_MASTER_KEY: blank, SVC_LOG_LEVEL: blank })
    t.same([c.port, c.shutdownGraceMs, c.rateLimit.leasePercent, c.reactors.hotConcurrency, c.host, c.masterKey, c.logLevel], [3000, 10_000, 1, 1, '127.0.0.1', undefined, 'info'], JSON.stringify(blank))
  }
})

t.test('a number is decimal digits: what ajv would coerce otherwise is refused, naming the variable', async (t) => {
  for (const odd of [' 80', '80 ', '1e3', '0x10', '0b11', '1.0', '+5', '12abc', 'Infinity']) {
    const err = t.throws(() => loadConfig({ PORT: odd })) as ConfigError
    t.same(err.problems, [`PORT must be a whole number in decimal digits, not ${JSON.stringify(odd)}`])
  }
  t.equal(loadConfig({ PORT: '0080' }).port, 80, 'leading zeros are still decimal')
  t.match((t.throws(() => loadConfig({ SVC_BODY_LIMIT_BYTES: '-1' })) as ConfigError).problems, [/^SVC_BODY_LIMIT_BYTES must be >= 1/], 'a negative number gets its bound')
  const both = t.throws(() => loadConfig({ SVC_REACTOR_CONCURRENCY_PER_REACTOR: '0x20', SVC_DB_POOL_MAX: '0' })) as ConfigError
  t.same(both.problems, ['SVC_REACTOR_CONCURRENCY_PER_REACTOR must be a whole number in decimal digits, not "0x20"', 'SVC_DB_POOL_MAX must be >= 1'], 'reported with the schema\'s problems; bounds in order wait for valid values')
})

t.test('an enum error is one line listing the allowed values', async (t) => {
  const err = t.throws(() => loadConfig({ SVC_LOG_LEVEL: 'verbose', SVC_METRICS: 'yes' })) as ConfigError
  t.same(err.problems, [
    'SVC_LOG_LEVEL must be equal to one of the allowed values: fatal, error, warn, info, debug, trace, silent',
    'SVC_METRICS must be equal to one of the allowed values: off, port, operator',
  ])
  const c = loadConfig({ SVC_LOG_LEVEL: 'debug', SVC_METRICS: 'port' })
  t.same([c.logLevel, c.metrics.mode], ['debug', 'port'])
})

t.test('an SVC_ variable this version does not read is refused, with the setting it probably meant', async (t) => {
  const err = t.throws(() => loadConfig({ SVC_PROXY_ALLOW_PRIVAT: 'false', SVC_RATE_LIMIT_GLOBL: '5/1', SVC_NOTHING_LIKE_IT: '1', OTHER_TOOL_SETTING: 'x' })) as ConfigError
  t.ok(err instanceof ConfigError)
  t.same(err.problems, [
    'SVC_NOTHING_LIKE_IT is not a setting of this version; remove it or correct its name',
    'SVC_PROXY_ALLOW_PRIVAT is not a setting of this version (did you mean SVC_PROXY_ALLOW_PRIVATE?); remove it or correct its name',
    'SVC_RATE_LIMIT_GLOBL is not a setting of this version (did you mean SVC_RATE_LIMIT_GLOBAL?); remove it or correct its name',
  ])
  t.doesNotThrow(() => loadConfig({ SVC_PROXY_ALLOW_PRIVATE: 'true', PATH: '/bin', NODE_OPTIONS: '' }), 'known SVC_ and foreign variables pass')
})

t.test('SVC_CORS_ORIGINS takes origins exactly as browsers send them, or * alone', async (t) => {
  t.same(loadConfig({}).cors.origins, [], 'unset: no CORS')
  t.same(loadConfig({ SVC_CORS_ORIGINS: ' https://shop.example.com , http://localhost:8080,https://shop.example.com' }).cors.origins, ['https://shop.example.com', 'http://localhost:8080'])
  t.same(loadConfig({ SVC_CORS_ORIGINS: '*' }).cors.origins, ['*'])
  const err = t.throws(() => loadConfig({ SVC_CORS_ORIGINS: 'https://shop.example.com/, shop.example.com, https://Shop.example.com, https://a.example:443, ftp://a.example, null, https://*.example.com' })) as ConfigError
  t.same(err.problems, [
    'SVC_CORS_ORIGINS: "https://shop.example.com/", "shop.example.com", "https://Shop.example.com", "https://a.example:443", "ftp://a.example", "null", "https://*.example.com" are not origins (scheme://host[:port], lower case, no path or trailing slash, no wildcard but * alone, e.g. https://shop.example.com)',
  ])
  const mixed = t.throws(() => loadConfig({ SVC_CORS_ORIGINS: '*, https://shop.example.com', PORT: 'x' })) as ConfigError
  t.match(mixed.problems, [/^PORT /, 'SVC_CORS_ORIGINS: * allows every origin and cannot be listed with others'], 'reported with the others')
})
