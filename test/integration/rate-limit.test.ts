import { once } from 'node:events'
import type { AddressInfo } from 'node:net'
import Koa from 'koa'
import t, { type Test } from 'tap'
import { Client } from 'undici'
import { testConfig, type Config } from '../../src/config/index.js'
import { AppError, PROBLEM_CONTENT_TYPE, toProblem } from '../../src/errors/index.js'
import { rateLimitMiddleware } from '../../src/http/middleware/rate-limit.js'
import { createRateLimiter, type RateLimiter } from '../../src/ratelimit/index.js'
import { closedPortUrl, fakeClock, recordingLogger, REDIS_URL, skipWithoutRedis, uniquePrefix } from '../helpers/ratelimit.js'

type Backend = 'memory' | 'redis'

/** Stand-in for the lead's error handler: AppError -> problem+json with its headers. */
function minimalApp(limiter: RateLimiter, config: Config) {
  const app = new Koa()
  const seen = { handled: 0 }
  app.use(async (ctx, next) => {
    try {
      await next()
    } catch (err) {
      const problem = toProblem(err)
      ctx.status = problem.status
      ctx.type = PROBLEM_CONTENT_TYPE
      ctx.body = problem
      if (err instanceof AppError && err.headers) ctx.set(err.headers)
    }
  })
  app.use(rateLimitMiddleware(limiter, config))
  app.use((ctx) => {
    seen.handled++
    ctx.body = { ok: true }
  })
  return { app, seen }
}

interface Served {
  send(method: string, path: string, forwardedFor?: string): Promise<{ status: number; retryAfter: string | undefined; body: unknown; type: string | undefined }>
  seen: { handled: number }
}

async function serve(t: Test, limiter: RateLimiter, config: Config): Promise<Served> {
  const { app, seen } = minimalApp(limiter, config)
  const server = app.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const client = new Client(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)
  t.teardown(async () => {
    await client.close()
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
  })
  return {
    seen,
    async send(method, path, forwardedFor) {
      const headers = forwardedFor ? { 'x-forwarded-for': forwardedFor } : undefined
      const res = await client.request({ method, path, headers })
      const body = await res.body.json()
      const h = (name: string) => res.headers[name] as string | undefined
      return { status: res.statusCode, retryAfter: h('retry-after'), body, type: h('content-type') }
    },
  }
}

async function setup(t: Test, backend: Backend, env: Record<string, string>, now?: () => number) {
  const config = testConfig({ ...env, ...(backend === 'redis' ? { REDIS_URL } : {}) })
  const keyPrefix = backend === 'redis' ? uniquePrefix(t) : undefined
  const limiter = createRateLimiter({ config, logger: recordingLogger(), keyPrefix, now })
  t.teardown(() => limiter.close())
  return { ...(await serve(t, limiter, config)), limiter, config, keyPrefix }
}

async function statuses(s: Served, n: number, method: string, path: string, xff?: string) {
  const out: number[] = []
  for (let i = 0; i < n; i++) out.push((await s.send(method, path, xff)).status)
  return out
}

const redisSkip = await skipWithoutRedis()

for (const backend of ['memory', 'redis'] as const) {
  t.test(`${backend} store`, { skip: backend === 'redis' && redisSkip }, async (t) => {
    t.test('exactly the limit passes; the next gets 429 with Retry-After, before the handler runs', async (t) => {
      const s = await setup(t, backend, { SVC_RATE_LIMIT_GLOBAL: '3/10' })
      t.same(await statuses(s, 3, 'GET', '/anything'), [200, 200, 200])
      const res = await s.send('GET', '/anything')
      t.equal(res.status, 429)
      t.match(res.retryAfter, /^[1-9][0-9]*$/)
      t.ok(Number(res.retryAfter) <= 10)
      t.equal(res.type, PROBLEM_CONTENT_TYPE)
      t.match(res.body, { status: 429, type: '/problems/rate-limited', title: 'Too many requests.' })
      t.equal(s.seen.handled, 3, 'a blocked request never reaches the handler')
    })

    t.test('each route scope, counted per client IP behind a trusted proxy', async (t) => {
      const s = await setup(t, backend, {
        SVC_TRUSTED_PROXIES: '127.0.0.1',
        SVC_RATE_LIMIT_PORTAL: '2/10',
        SVC_RATE_LIMIT_TOKENS_SEARCH: '2/10',
        SVC_RATE_LIMIT_TOKENS_LIST: '2/10',
        SVC_RATE_LIMIT_TOKENS_CREATE: '2/10',
      })
      const routes: [string, [string, string][]][] = [
        ['portal', [['GET', '/portal'], ['POST', '/portal/login'], ['GET', '/portal/x']]],
        ['tokens_search', [['POST', '/tokens/search'], ['POST', '/tokens/search'], ['POST', '/tokens/search']]],
        ['tokens_list', [['GET', '/tokens'], ['GET', '/tokens?limit=5'], ['GET', '/tokens/']]],
        ['tokens_create', [['POST', '/tokens'], ['POST', '/tokenize'], ['POST', '/tokens']]],
      ]
      for (const [i, [scope, requests]] of routes.entries()) {
        const ip = `198.51.100.${i + 1}`
        const got = []
        for (const [method, path] of requests) got.push((await s.send(method, path, ip)).status)
        t.same(got, [200, 200, 429], `${scope}: the third request is over`)
        t.equal((await s.send('GET', '/tokens/tok_1', ip)).status, 200, `${scope}: other routes of the IP pass`)
        t.equal((await s.send(requests[0]![0], requests[0]![1], '203.0.113.1, ' + ip)).status, 429, `${scope}: spoofed left hop changes nothing`)
      }
      t.same(await statuses(s, 2, 'POST', '/tokens/search', '198.51.100.99'), [200, 200], 'another IP has its own count')
    })

    t.test('X-Forwarded-For from an untrusted peer is ignored', async (t) => {
      const s = await setup(t, backend, { SVC_TRUSTED_PROXIES: '10.0.0.0/8', SVC_RATE_LIMIT_GLOBAL: '2/10' })
      const got = []
      for (const xff of ['1.1.1.1', '2.2.2.2', '3.3.3.3']) got.push((await s.send('GET', '/', xff)).status)
      t.same(got, [200, 200, 429], 'every request counted against the socket address')
    })

    t.test('real defaults: 50 searches pass, the 51st is blocked for 10 s', async (t) => {
      const s = await setup(t, backend, {})
      const got = await statuses(s, 51, 'POST', '/tokens/search')
      t.same(got.slice(0, 50), Array(50).fill(200))
      const last = await s.send('POST', '/tokens/search')
      t.equal(got[50], 429)
      t.equal(last.status, 429)
      t.equal(last.retryAfter, '10')
    })
  })
}

t.test('memory store at the real defaults: the 10 s block holds, then lifts', async (t) => {
  const clock = fakeClock()
  const s = await setup(t, 'memory', {}, clock.now)
  await statuses(s, 51, 'POST', '/tokens/search')
  clock.advance(9_001)
  const during = await s.send('POST', '/tokens/search')
  t.same([during.status, during.retryAfter], [429, '1'], 'Retry-After rounds up')
  t.equal((await s.send('GET', '/tokens')).status, 200, 'the search block leaves other scopes alone')
  clock.advance(999)
  t.same(await statuses(s, 51, 'POST', '/tokens/search'), [...Array(50).fill(200), 429], 'a fresh window after the block')
})

t.test('two app instances on one Redis share the count', { skip: redisSkip }, async (t) => {
  const a = await setup(t, 'redis', { SVC_RATE_LIMIT_GLOBAL: '4/10' })
  const config = testConfig({ REDIS_URL, SVC_RATE_LIMIT_GLOBAL: '4/10' })
  const limiterB = createRateLimiter({ config, logger: recordingLogger(), keyPrefix: a.keyPrefix })
  t.teardown(() => limiterB.close())
  const b = await serve(t, limiterB, config)
  const got = [(await a.send('GET', '/')).status, (await b.send('GET', '/')).status, (await a.send('GET', '/')).status, (await b.send('GET', '/')).status]
  t.same(got, [200, 200, 200, 200])
  t.equal((await a.send('GET', '/')).status, 429)
  t.equal((await b.send('GET', '/')).status, 429, 'the block is shared')
})

t.test('Redis unreachable: limits still apply, never a 500', async (t) => {
  const config = testConfig({ REDIS_URL: await closedPortUrl(), SVC_RATE_LIMIT_GLOBAL: '3/10', SVC_REDIS_COMMAND_TIMEOUT_MS: '100' })
  const logger = recordingLogger()
  const limiter = createRateLimiter({ config, logger })
  t.teardown(() => limiter.close())
  const s = await serve(t, limiter, config)
  t.same(await statuses(s, 5, 'GET', '/'), [200, 200, 200, 429, 429])
  t.same(limiter.status(), { store: 'redis', degraded: true })
  t.equal(logger.warns.length, 1)
})

t.test('disabled: nothing is counted', async (t) => {
  const s = await setup(t, 'memory', { SVC_RATE_LIMIT_ENABLED: 'false', SVC_RATE_LIMIT_GLOBAL: '1/10' })
  t.same(await statuses(s, 3, 'GET', '/'), [200, 200, 200])
  t.same(s.limiter.status(), { store: 'disabled', degraded: false })
})
