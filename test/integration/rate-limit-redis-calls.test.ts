import { randomUUID } from 'node:crypto'
import { Redis } from 'ioredis'
import t from 'tap'
import { startTestApp } from '../helpers/app.js'
import { REDIS_URL, skipWithoutRedis, uniquePrefix } from '../helpers/ratelimit.js'
import { eventually } from '../helpers/wait.js'

/**
 * The limiter's cost in round trips, seen from the Redis server (MONITOR) while the full app
 * serves real requests: every request is decided by exactly one script call over all of its
 * scopes, whatever the route, and nothing else of the limiter reaches Redis.
 */
t.test('one Redis call per request, all scopes in it', { skip: await skipWithoutRedis() }, async (t) => {
  const prefix = uniquePrefix(t)
  const app = await startTestApp(t, { REDIS_URL, SVC_RATE_LIMIT_KEY_PREFIX: prefix, SVC_TRUSTED_PROXIES: '127.0.0.1' })
  const client = new Redis(REDIS_URL)
  const monitor = await client.monitor()
  t.teardown(() => {
    monitor.disconnect()
    client.disconnect()
  })
  const sentinel = `sentinel-${randomUUID()}`
  const seen: { args: string[]; fromScript: boolean }[] = []
  monitor.on('monitor', (_time: string, args: string[], source: string) => {
    if (args.some((a) => a.startsWith(prefix)) || args.includes(sentinel)) seen.push({ args, fromScript: source === 'lua' })
  })

  // Two one-scope routes (global only) and two with a route scope too, from one client IP.
  const requests: [string, string, string][] = [
    ['GET', '/healthz', 'global'],
    ['POST', '/proxy', 'global'],
    ['POST', '/tokens/search', 'tokens_search'],
    ['GET', '/tokens', 'tokens_list'],
  ]
  for (const [method, path] of requests) {
    const res = await app.request(method, path, { key: null, headers: { 'x-forwarded-for': '198.51.100.7' } })
    t.not(res.status, 429, `${method} ${path} is counted, not limited`)
  }
  // Commands on one server run in order: once the sentinel shows, every call the requests made has.
  await client.echo(sentinel)
  await eventually(async () => seen.length, () => seen.some((s) => s.args.includes(sentinel)))
  const calls = seen.filter((s) => !s.fromScript && !s.args.includes(sentinel))
  t.equal(calls.length, requests.length, `one call per request (${calls.map((c) => c.args[0]).join(', ')})`)
  t.ok(calls.every((c) => /^eval(sha)?$/i.test(c.args[0]!)), 'each a script call')
  for (const [i, [method, path, scope]] of requests.entries()) {
    const keys = calls[i]!.args.filter((a) => a.startsWith(prefix))
    t.ok(keys.some((k) => k.endsWith(':global:n')), `${method} ${path}: global counted in the call`)
    t.ok(keys.some((k) => k.endsWith(`:${scope}:n`)), `${method} ${path}: ${scope} counted in the same call`)
  }
})
