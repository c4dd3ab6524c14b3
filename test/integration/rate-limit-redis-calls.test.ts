import { randomUUID } from 'node:crypto'
import net from 'node:net'
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
  t.teardown(() => client.disconnect())
  const sentinel = `sentinel-${randomUUID()}`
  const seen: { args: string[]; fromScript: boolean }[] = []
  // MONITOR on a plain socket (ioredis' own monitor mode can mistake early output for replies).
  // Each line: +<time> [<db> <client address or "lua">] "<arg>" "<arg>" ...
  const redis = new URL(REDIS_URL)
  const monitor = net.connect(Number(redis.port || 6379), redis.hostname)
  t.teardown(() => monitor.destroy())
  monitor.setEncoding('utf8')
  let pending = ''
  let started: () => void
  const monitoring = new Promise<void>((resolve) => (started = resolve))
  monitor.on('data', (chunk: string) => {
    pending += chunk
    for (let end = pending.indexOf('\r\n'); end >= 0; end = pending.indexOf('\r\n')) {
      const line = pending.slice(0, end)
      pending = pending.slice(end + 2)
      if (line === '+OK') started()
      const m = /^\+\d+\.\d+ \[\d+ ([^\]]+)\] (.*)$/.exec(line)
      if (!m) continue
      const args = [...m[2]!.matchAll(/"((?:[^"\\]|\\.)*)"/g)].map((a) => a[1]!)
      if (args.some((a) => a.startsWith(prefix)) || args.includes(sentinel)) seen.push({ args, fromScript: m[1] === 'lua' })
    }
  })
  monitor.write('MONITOR\r\n')
  await monitoring

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
