import t from 'tap'
import { startTestApp } from '../helpers/app.js'
import { startFaultProxy } from '../helpers/fault-proxy.js'
import { appKey } from '../helpers/tokens.js'
import { timed, until } from '../helpers/wait.js'

// Redis behind a fault proxy this test controls: the shared server is never frozen.
const skip = process.env.REDIS_URL ? false : 'needs REDIS_URL (faults of a Redis connection)'
const COMMAND_TIMEOUT_MS = 250
// Room for scheduling on a loaded machine; what is asserted is "bounded", not "fast".
const SLACK_MS = 1500

const FAULTS = { pause: 'frozen', drop: 'gone', reset: 'restarted (connections reset)' } as const

for (const fault of ['pause', 'drop', 'reset'] as const) {
  t.test(`Redis ${FAULTS[fault]}: requests are answered within the command bound, then windows are shared again`, { skip }, async (t) => {
    const proxy = await startFaultProxy(t, process.env.REDIS_URL!)
    const app = await startTestApp(t, { REDIS_URL: proxy.url, SVC_REDIS_COMMAND_TIMEOUT_MS: String(COMMAND_TIMEOUT_MS) })
    t.teardown(() => proxy.resume())
    const key = await appKey(app, { type: 'private', permissions: ['token:create', 'token:read'] })
    t.equal((await app.request('GET', '/readyz', { key: null })).body.components.rate_limit, 'ok')

    proxy[fault]()
    const results = await Promise.all([
      timed(app.request('POST', '/tokens', { key, body: { type: 'token', data: 'x' } })),
      timed(app.request('GET', '/applications')),
      timed(app.request('GET', '/readyz', { key: null })),
    ])
    for (const { ms } of results) t.ok(ms < COMMAND_TIMEOUT_MS + SLACK_MS, `answered within its bound (${ms} ms)`)
    t.equal(results[0]!.value.status, 201, 'served on in-process windows')
    t.equal(results[1]!.value.status, 200)
    // A reset connection is re-opened at once: there may be no moment of degradation to see.
    if (fault !== 'reset') {
      await until(async () => (await app.request('GET', '/readyz', { key: null })).body.components.rate_limit === 'degraded', 'readiness reports the limiter degraded')
    }
    t.equal((await app.request('GET', '/readyz', { key: null })).status, 200, 'still ready: the limiter falls back, Postgres is up')

    proxy.resume()
    await until(async () => {
      await app.request('GET', '/applications')
      return (await app.request('GET', '/readyz', { key: null })).body.components.rate_limit === 'ok'
    }, 'the limiter is back on Redis')
  })
}
