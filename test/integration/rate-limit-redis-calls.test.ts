import { randomUUID } from 'node:crypto'
import net from 'node:net'
import { Redis } from 'ioredis'
import t from 'tap'
import { startTestApp } from '../helpers/app.js'
import { REDIS_URL, skipWithoutRedis, uniquePrefix } from '../helpers/ratelimit.js'
import { eventually } from '../helpers/wait.js'

/**
 * The limiter's cost in round trips, seen from the Redis server (MONITOR) while the full app
 * serves real requests at the default limits: a request whose scopes all hold a lease (a share
 * of the window's budget, stores/leases.ts) costs no round trip; one whose lease ran out costs
 * one script call carrying exactly the scopes that ran out; nothing else of the limiter reaches
 * Redis.
 */
t.test('one script call per lease, with exactly the scopes whose lease ran out', { skip: await skipWithoutRedis() }, async (t) => {
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

  // The global default is 1000/10 s: leases of 10. The route scopes at their defaults lease one
  // request at a time (search 50, list 100), so each of those requests asks Redis for its route
  // scope, while global counts from its lease.
  const requests: [string, string][] = [
    ['GET', '/healthz'],
    ['POST', '/proxy'],
    ['POST', '/tokens/search'],
    ['GET', '/tokens'],
    ...Array.from({ length: 16 }, (): [string, string] => ['GET', '/healthz']),
  ]
  for (const [method, path] of requests) {
    const res = await app.request(method, path, { key: null, headers: { 'x-forwarded-for': '198.51.100.7' } })
    t.not(res.status, 429, `${method} ${path} is counted, not limited`)
    t.ok(Number(res.headers.get('ratelimit-remaining')) >= 0, 'with a quota')
  }
  // Commands on one server run in order: once the sentinel shows, every call the requests made has.
  await client.echo(sentinel)
  await eventually(async () => seen.length, () => seen.some((s) => s.args.includes(sentinel)))
  const calls = seen.filter((s) => !s.fromScript && !s.args.includes(sentinel))
  t.ok(calls.every((c) => /^eval(sha)?$/i.test(c.args[0]!)), 'each a script call')
  const scopesOf = (call: { args: string[] }) => call.args.filter((a) => a.startsWith(prefix) && a.endsWith(':n')).map((k) => k.split(':').at(-2))
  // 20 requests: global leased at the 1st (units 1-10) and the 11th of its requests (11-20);
  // search and list once each.
  t.same(calls.map(scopesOf), [['global'], ['tokens_search'], ['tokens_list'], ['global']], 'four calls for twenty requests')
  const wants = (call: { args: string[] }) => call.args.slice(-1)[0]
  t.same(calls.map(wants), ['10', '1', '1', '10'], 'a lease of 10 for global, of 1 for the small route limits')
})
