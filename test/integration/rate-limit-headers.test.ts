import t from 'tap'
import { startTestApp, type TestResponse } from '../helpers/app.js'

/**
 * RateLimit-Limit / -Remaining / -Reset (IETF httpapi draft fields) on every answer of a limited
 * scope, Retry-After on 429, on whichever store the environment gives (memory, or Redis with
 * REDIS_URL). Each subtest is its own client IP via the trusted 127.0.0.1.
 */
const app = await startTestApp(t, {
  SVC_TRUSTED_PROXIES: '127.0.0.1',
  SVC_RATE_LIMIT_GLOBAL: '5/60',
  SVC_RATE_LIMIT_TOKENS_LIST: '2/60',
  SVC_RATE_LIMIT_BLOCK_SECONDS: '30',
})

const from = (ip: string, method: string, path: string, key: string | null = null) =>
  app.request(method, path, { key, headers: { 'x-forwarded-for': ip } })

function quota(res: TestResponse) {
  return {
    limit: res.headers.get('ratelimit-limit'),
    remaining: res.headers.get('ratelimit-remaining'),
    reset: Number(res.headers.get('ratelimit-reset')),
  }
}

t.test('every answer counts down the tightest scope', async (t) => {
  const ip = '203.0.113.1'
  const answers = [await from(ip, 'GET', '/healthz'), await from(ip, 'GET', '/applications'), await from(ip, 'GET', '/nope')]
  t.same(answers.map((r) => r.status), [200, 401, 404], 'success, problem and unknown route alike')
  t.same(answers.map((r) => quota(r).remaining), ['4', '3', '2'])
  for (const res of answers) {
    t.equal(quota(res).limit, '5')
    t.ok(quota(res).reset >= 1 && quota(res).reset <= 60, `reset in whole seconds within the window (${quota(res).reset})`)
  }
})

t.test('a route scope tighter than global is the one reported', async (t) => {
  const ip = '203.0.113.2'
  const first = await from(ip, 'GET', '/tokens', app.adminKey)
  t.match(quota(first), { limit: '2', remaining: '1' })
  const v2 = await from(ip, 'GET', '/v2/tokens', app.adminKey)
  t.match(quota(v2), { limit: '2', remaining: '0' }, '/v2/tokens counts in the same scope')
  const other = await from(ip, 'GET', '/healthz')
  t.match(quota(other), { limit: '5', remaining: '2' }, 'other routes report global')
})

t.test('429 carries Retry-After and a reset equal to it', async (t) => {
  const ip = '203.0.113.3'
  for (let i = 0; i < 2; i++) await from(ip, 'GET', '/tokens')
  const denied = await from(ip, 'GET', '/tokens')
  t.equal(denied.status, 429)
  t.match(quota(denied), { limit: '2', remaining: '0' })
  t.equal(denied.headers.get('retry-after'), String(quota(denied).reset))
  t.ok(quota(denied).reset > 1 && quota(denied).reset <= 30, 'the 30 s block')
})

t.test('the proxy answers carry them too', async (t) => {
  const res = await from('203.0.113.4', 'POST', '/proxy')
  t.equal(res.status, 401)
  t.ok(res.body.proxy_error)
  t.match(quota(res), { limit: '5', remaining: '4' })
})

t.test('no headers when rate limiting is off', async (t) => {
  const off = await startTestApp(t, { SVC_RATE_LIMIT_ENABLED: 'false' })
  const res = await off.request('GET', '/healthz')
  t.equal(res.headers.get('ratelimit-limit'), null)
  t.equal(res.headers.get('ratelimit-remaining'), null)
})
