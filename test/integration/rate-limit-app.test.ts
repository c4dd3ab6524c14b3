import t, { type Test } from 'tap'
import { PROBLEM_CONTENT_TYPE } from '../../src/errors/index.js'
import { startTestApp, type RequestOptions, type TestApp, type TestResponse } from '../helpers/app.js'
import { sleep, startSilentRedis, uniquePrefix } from '../helpers/ratelimit.js'

/**
 * The limiter inside the full Tessera app, on whichever store the environment gives: in process
 * without REDIS_URL, Redis with it (the suite runs both ways). Short limits and 1 s blocks keep it
 * fast; each subtest uses its own client IPs (X-Forwarded-For from the trusted 127.0.0.1) so the
 * shared app's counts never mix.
 */
const backend = process.env.REDIS_URL ? 'redis' : 'memory'

const GLOBAL = 5
const ROUTE = 2
const app = await startTestApp(t, {
  SVC_TRUSTED_PROXIES: '127.0.0.1',
  SVC_RATE_LIMIT_GLOBAL: `${GLOBAL}/60`,
  SVC_RATE_LIMIT_PORTAL: `${ROUTE}/60`,
  SVC_RATE_LIMIT_TOKENS_SEARCH: `${ROUTE}/60`,
  SVC_RATE_LIMIT_TOKENS_LIST: `${ROUTE}/60`,
  SVC_RATE_LIMIT_TOKENS_CREATE: `${ROUTE}/60`,
  SVC_RATE_LIMIT_BLOCK_SECONDS: '1',
  SVC_BODY_LIMIT_BYTES: '1024',
})

/** A request from client `ip` (via the trusted proxy), without an API key unless one is given. */
function from(target: TestApp, ip: string | undefined, method: string, path: string, options: RequestOptions = {}): Promise<TestResponse> {
  const headers = { ...options.headers, ...(ip === undefined ? {} : { 'x-forwarded-for': ip }) }
  return target.request(method, path, { key: null, ...options, headers })
}

async function statuses(target: TestApp, ip: string | undefined, n: number, method: string, path: string, options?: RequestOptions): Promise<number[]> {
  const out: number[] = []
  for (let i = 0; i < n; i++) out.push((await from(target, ip, method, path, options)).status)
  return out
}

function assertLimited(t: Test, res: TestResponse, scope: string, label = `429 in ${scope}`): void {
  t.equal(res.status, 429, label)
  t.equal(res.headers.get('content-type')?.split(';')[0], PROBLEM_CONTENT_TYPE, `${label}: problem+json`)
  t.match(res.headers.get('retry-after'), /^[1-9][0-9]*$/, `${label}: Retry-After in whole seconds`)
  t.match(res.body, { type: '/problems/rate-limited', status: 429, title: 'Too many requests.' }, `${label}: problem body`)
  t.match(res.body?.detail, new RegExp(`\\(${scope}\\)`), `${label}: names the scope`)
}

t.test(`limiter runs on the ${backend} store`, async (t) => {
  t.same(app.services.limiter.status(), { store: backend, degraded: false })
})

t.test('exactly the limit passes; the next is 429 with Retry-After; the block holds, then lifts', async (t) => {
  const ip = '198.51.100.1'
  t.same(await statuses(app, ip, GLOBAL, 'GET', '/healthz'), Array(GLOBAL).fill(200))
  const over = await from(app, ip, 'GET', '/healthz')
  assertLimited(t, over, 'global')
  t.equal(over.headers.get('retry-after'), '1', 'Retry-After is the 1 s block')

  assertLimited(t, await from(app, ip, 'GET', '/healthz'), 'global', 'the block holds')
  assertLimited(t, await from(app, ip, 'GET', '/readyz'), 'global', 'the block covers every route of the IP')

  await sleep(Number(over.headers.get('retry-after')) * 1000 + 150)
  t.same(await statuses(app, ip, GLOBAL, 'GET', '/healthz'), Array(GLOBAL).fill(200), 'after the block: a fresh window')
  assertLimited(t, await from(app, ip, 'GET', '/healthz'), 'global', 'and the fresh window has the same limit')
})

t.test('the check runs before authentication and body parsing', async (t) => {
  const ip = '198.51.100.2'
  t.same(await statuses(app, ip, GLOBAL, 'GET', '/applications'), Array(GLOBAL).fill(401), 'requests without a key are counted')
  assertLimited(t, await from(app, ip, 'GET', '/applications'), 'global', 'a blocked request without a key is 429, not 401')
  assertLimited(t, await from(app, ip, 'GET', '/applications', { key: app.adminKey }), 'global', 'a valid key does not lift the block')

  const oversized = { rawBody: JSON.stringify({ name: 'x'.repeat(64 * 1024), type: 'private', permissions: [] }), headers: { 'content-type': 'application/json' } }
  t.equal((await from(app, '198.51.100.3', 'POST', '/applications', { key: app.adminKey, ...oversized })).status, 413, 'control: from an unblocked IP the body is too large')
  assertLimited(t, await from(app, ip, 'POST', '/applications', { key: app.adminKey, ...oversized }), 'global', 'an oversized body from a blocked IP is 429, not 413')
})

t.test('each route scope counts on its own and in global', async (t) => {
  // The token routes may not exist yet (401/404); what matters is "not 429" until the limit.
  const scopes: [string, [string, string][]][] = [
    ['tokens_search', [['POST', '/tokens/search'], ['POST', '/tokens/search'], ['POST', '/tokens/search']]],
    ['tokens_list', [['GET', '/tokens'], ['GET', '/tokens?limit=1'], ['GET', '/tokens']]],
    ['tokens_create', [['POST', '/tokens'], ['POST', '/tokenize'], ['POST', '/tokens']]],
    ['portal', [['GET', '/portal'], ['POST', '/portal/login'], ['GET', '/portal/x']]],
  ]
  for (const [i, [scope, requests]] of scopes.entries()) {
    const ip = `198.51.100.${10 + i}`
    const got: TestResponse[] = []
    for (const [method, path] of requests) got.push(await from(app, ip, method, path, method === 'POST' ? { body: {} } : {}))
    t.not(got[0]?.status, 429, `${scope}: 1st passes the limiter`)
    t.not(got[1]?.status, 429, `${scope}: 2nd passes the limiter`)
    assertLimited(t, got[2]!, scope, `${scope}: 3rd is over the route limit`)
    // global holds 3 requests of this IP now (the blocked one too): 2 more pass, the next is over.
    t.same(await statuses(app, ip, GLOBAL - ROUTE - 1, 'GET', '/healthz'), [200, 200], `${scope}: other routes of the IP pass`)
    assertLimited(t, await from(app, ip, 'GET', '/healthz'), 'global', `${scope}: its requests were counted in global`)
  }
})

t.test('scopes are per client IP through a trusted proxy; spoofed hops change nothing', async (t) => {
  const [a, b] = ['198.51.100.20', '198.51.100.21']
  t.same(await statuses(app, a, GLOBAL, 'GET', '/healthz'), Array(GLOBAL).fill(200))
  assertLimited(t, await from(app, a, 'GET', '/healthz'), 'global', 'A is blocked')
  t.same(await statuses(app, b, GLOBAL, 'GET', '/healthz'), Array(GLOBAL).fill(200), 'B has its own count')
  assertLimited(t, await from(app, b, 'GET', '/healthz'), 'global', 'B is blocked at its own limit')
  assertLimited(t, await from(app, `203.0.113.7, ${a}`, 'GET', '/healthz'), 'global', 'a client-written hop left of A is ignored')

  const [c, d] = ['198.51.100.22', '198.51.100.23']
  t.same(await statuses(app, c, ROUTE, 'POST', '/tokens/search', { body: {} }).then((s) => s.map((n) => n === 429)), [false, false])
  assertLimited(t, await from(app, c, 'POST', '/tokens/search', { body: {} }), 'tokens_search', 'C is blocked in tokens_search')
  t.not((await from(app, d, 'POST', '/tokens/search', { body: {} })).status, 429, 'D is not')
})

t.test('X-Forwarded-For from an untrusted peer is ignored', async (t) => {
  const untrusted = await startTestApp(t, { SVC_RATE_LIMIT_GLOBAL: '3/60', SVC_RATE_LIMIT_BLOCK_SECONDS: '1' })
  const got: number[] = []
  for (const xff of ['198.51.100.30', '198.51.100.31', '198.51.100.32']) got.push((await from(untrusted, xff, 'GET', '/healthz')).status)
  t.same(got, [200, 200, 200])
  assertLimited(t, await from(untrusted, '198.51.100.33', 'GET', '/healthz'), 'global', 'every request counted against the socket address')
})

t.test('/readyz reports the limiter', async (t) => {
  const res = await from(app, '198.51.100.40', 'GET', '/readyz')
  t.equal(res.status, 200)
  t.match(res.body, { status: 'ok', components: { database: 'ok', rate_limit: 'ok' } })
})

t.test('two Tessera apps with the same key prefix share the count', { skip: backend === 'redis' ? false : 'needs REDIS_URL' }, async (t) => {
  const env = { SVC_RATE_LIMIT_KEY_PREFIX: uniquePrefix(t), SVC_RATE_LIMIT_GLOBAL: '4/60', SVC_RATE_LIMIT_BLOCK_SECONDS: '1' }
  const [a, b] = await Promise.all([startTestApp(t, env), startTestApp(t, env)])
  const got: number[] = []
  for (const target of [a, b, a, b]) got.push((await from(target, undefined, 'GET', '/healthz')).status)
  t.same(got, [200, 200, 200, 200], 'four requests over two apps: exactly the shared limit')
  assertLimited(t, await from(a, undefined, 'GET', '/healthz'), 'global', 'the fifth is over')
  assertLimited(t, await from(b, undefined, 'GET', '/healthz'), 'global', 'the block is shared')
})

t.test('Redis frozen (accepts TCP, never answers): bounded answers, no 500, limits apply in process, /readyz degraded', async (t) => {
  const silent = await startSilentRedis()
  const frozen = await startTestApp(t, {
    REDIS_URL: silent.url,
    SVC_TRUSTED_PROXIES: '127.0.0.1',
    SVC_RATE_LIMIT_GLOBAL: `${GLOBAL}/60`,
    SVC_RATE_LIMIT_BLOCK_SECONDS: '1',
  })
  t.teardown(() => silent.close())

  const timed = async (ip: string) => {
    const started = performance.now()
    const res = await from(frozen, ip, 'GET', '/healthz')
    return { status: res.status, ms: performance.now() - started }
  }
  const check = (results: { status: number; ms: number }[], label: string) => {
    t.same(results.filter((r) => r.ms >= 1000), [], `${label}: every request answers within 1 s`)
    t.notOk(results.some((r) => r.status >= 500), `${label}: none is a 5xx`)
  }

  // A concurrent burst from one IP: the in-process fallback still counts exactly.
  const burst = await Promise.all(Array.from({ length: 2 * GLOBAL }, () => timed('198.51.100.50')))
  check(burst, 'burst')
  t.same(burst.map((r) => r.status).sort(), [...Array(GLOBAL).fill(200), ...Array(GLOBAL).fill(429)], 'exactly the limit passes')
  t.same((await timed('198.51.100.51')).status, 200, 'another IP has its own count')

  const ready = await from(frozen, '198.51.100.52', 'GET', '/readyz')
  t.equal(ready.status, 200)
  t.match(ready.body, { status: 'degraded', components: { rate_limit: 'degraded', database: 'ok' } })
  t.match(frozen.services.limiter.status(), { store: 'redis', degraded: true })

  // Past the probe interval one request tries Redis again; it too must stay bounded.
  await sleep(1100)
  const later: { status: number; ms: number }[] = []
  for (let i = 0; i <= GLOBAL; i++) later.push(await timed('198.51.100.53'))
  check(later, 'after the probe interval')
  t.same(later.map((r) => r.status), [...Array(GLOBAL).fill(200), 429], 'limits still apply')
})

t.test('IPv6 clients are counted per /64', async (t) => {
  // Two addresses of one /64: one bucket. A neighbouring /64: another client.
  t.same(await statuses(app, '2001:db8:64:1::1', GLOBAL, 'GET', '/healthz'), Array(GLOBAL).fill(200))
  assertLimited(t, await from(app, '2001:db8:64:1:ffff:ffff:ffff:fffe', 'GET', '/healthz'), 'global', 'another address of the same /64 is limited')
  t.equal((await from(app, '2001:db8:64:2::1', 'GET', '/healthz')).status, 200, 'the next /64 is not')
})
