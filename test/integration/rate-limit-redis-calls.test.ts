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
  // Twenty requests count in global: leased ten at a time, so two asks, or a few more when the
  // machine is slow enough for a lease to reach its 250 ms end with units left. Search and list
  // lease one unit: one ask each, carrying only that scope.
  const scopes = calls.map(scopesOf)
  t.equal(scopes.filter((s) => s.includes('tokens_search')).length, 1, 'one call for the search scope')
  t.equal(scopes.filter((s) => s.includes('tokens_list')).length, 1, 'one call for the list scope')
  t.ok(scopes.every((s) => s.length === 1 || (s.length === 2 && s[0] === 'global')), 'a call carries only the scopes whose lease ran out')
  const globalCalls = scopes.filter((s) => s.includes('global')).length
  t.ok(globalCalls >= 2 && globalCalls < 10, `${globalCalls} calls counted global for twenty requests`)
  t.same(calls.filter((_, i) => scopes[i]!.length === 1 && scopes[i]![0] === 'global').map(wants).filter((w) => w !== '10'), [], 'global asks for a lease of 10')
})

/** A one-scope call's `want`: its arguments end with limit, window, block, want, carried units. */
function wants(call: { args: string[] }): string | undefined {
  return call.args.at(-2)
}
