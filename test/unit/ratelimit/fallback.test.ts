import t from 'tap'
import { testConfig } from '../../../src/config/index.js'
import { createRateLimiter, type RateLimiter } from '../../../src/ratelimit/index.js'
import { FallbackStore } from '../../../src/ratelimit/stores/fallback.js'
import { MemoryStore } from '../../../src/ratelimit/stores/memory.js'
import type { Decision, RateLimitStore, ScopeHit } from '../../../src/ratelimit/types.js'
import {
  closedPortUrl, fakeClock, recordingLogger, skipWithoutRedis, sleep, startRedisProxy, startSilentRedis, uniquePrefix,
  type RecordingLogger,
} from '../../helpers/ratelimit.js'

const rule: ScopeHit = { scope: 'global', limit: 2, windowMs: 10_000, blockMs: 10_000 }

/** A primary store that fails on demand and counts its calls. */
function flakyStore() {
  const s = { down: false, calls: 0, pending: undefined as Promise<void> | undefined }
  const store: RateLimitStore = {
    async hit(): Promise<Decision> {
      s.calls++
      if (s.pending) await s.pending
      if (s.down) throw new Error('connection refused')
      return { allowed: true, quota: { limit: 2, remaining: 1, resetMs: 1000 } }
    },
    close: async () => undefined,
  }
  return Object.assign(s, { store })
}

t.test('fallback: degraded once per outage, probes once per interval, recovers', async (t) => {
  const clock = fakeClock()
  const logger = recordingLogger()
  const primary = flakyStore()
  const store = new FallbackStore(primary.store, new MemoryStore({ now: clock.now }), logger, { probeIntervalMs: 1000, now: clock.now })

  t.match(await store.hit('192.0.2.1', [rule]), { allowed: true })
  primary.down = true
  t.match(await store.hit('192.0.2.1', [rule]), { allowed: true }, 'counted in memory (1 of 2)')
  t.equal(store.degraded, true)
  t.match(await store.hit('192.0.2.1', [rule]), { allowed: true })
  t.match(await store.hit('192.0.2.1', [rule]), { allowed: false }, 'memory applies the same limits')
  t.equal(primary.calls, 2, 'no primary call between probes')
  clock.advance(1000)
  await store.hit('192.0.2.2', [rule])
  t.equal(primary.calls, 3, 'one probe after the interval')
  t.same(logger.warns.length, 1, 'warned once for the outage')

  primary.down = false
  clock.advance(1000)
  await store.hit('192.0.2.2', [rule])
  t.equal(store.degraded, false, 'a successful probe ends the outage')
  t.equal(logger.infos.length, 1)
  primary.down = true
  await store.hit('192.0.2.2', [rule])
  t.equal(logger.warns.length, 2, 'a new outage warns again')
})

t.test('fallback: concurrent requests share one probe', async (t) => {
  const clock = fakeClock()
  const primary = flakyStore()
  const store = new FallbackStore(primary.store, new MemoryStore({ now: clock.now }), recordingLogger(), { now: clock.now })
  primary.down = true
  await store.hit('192.0.2.1', [rule])
  clock.advance(1000)
  let release = () => undefined as void
  primary.pending = new Promise((resolve) => (release = resolve))
  const all = Promise.all(Array.from({ length: 5 }, () => store.hit('192.0.2.1', [rule])))
  release()
  await all
  t.equal(primary.calls, 2, 'the first outage call plus a single probe')
})

/** Each check must answer (never hang, never throw) well within the 1 s bound. */
async function timedChecks(t: { ok(v: unknown, m: string): void }, limiter: RateLimiter, n: number) {
  const decisions = []
  for (let i = 0; i < n; i++) {
    const started = performance.now()
    decisions.push(await limiter.check('192.0.2.50', 'GET', '/x'))
    const ms = performance.now() - started
    if (ms >= 1000) t.ok(false, `check ${i} took ${ms.toFixed(0)} ms`)
  }
  return decisions.map((d) => d.allowed)
}

function faultyLimiter(t: { teardown(fn: () => unknown): void }, redisUrl: string, logger: RecordingLogger, keyPrefix?: string) {
  const config = testConfig({ REDIS_URL: redisUrl, SVC_REDIS_COMMAND_TIMEOUT_MS: '100', SVC_RATE_LIMIT_GLOBAL: '3/10' })
  const limiter = createRateLimiter({ config, logger, keyPrefix, probeIntervalMs: 50 })
  t.teardown(() => limiter.close())
  return limiter
}

t.test('Redis accepting TCP and never answering: memory limits, degraded, one warning', async (t) => {
  const silent = await startSilentRedis()
  t.teardown(() => silent.close())
  const logger = recordingLogger()
  const limiter = faultyLimiter(t, silent.url, logger)
  t.same(await timedChecks(t, limiter, 6), [true, true, true, false, false, false])
  t.same(limiter.status(), { store: 'redis', degraded: true })
  t.equal(logger.warns.length, 1)
})

t.test('Redis port closed: memory limits, degraded, one warning', async (t) => {
  const logger = recordingLogger()
  const limiter = faultyLimiter(t, await closedPortUrl(), logger)
  t.same(await timedChecks(t, limiter, 5), [true, true, true, false, false])
  t.same(limiter.status(), { store: 'redis', degraded: true })
  t.equal(logger.warns.length, 1)
})

t.test('real Redis frozen, then killed, then back', { skip: await skipWithoutRedis() }, async (t) => {
  const proxy = await startRedisProxy()
  t.teardown(() => proxy.close())
  const logger = recordingLogger()
  const limiter = faultyLimiter(t, proxy.url, logger, uniquePrefix(t))
  const until = async (cond: () => Promise<boolean>) => {
    for (let i = 0; i < 250 && !(await cond()); i++) await sleep(20)
  }

  t.same(await timedChecks(t, limiter, 1), [true], 'counted in Redis')
  t.same(limiter.status(), { store: 'redis', degraded: false })
  proxy.freeze()
  t.same(await timedChecks(t, limiter, 4), [true, true, true, false], 'frozen: fresh memory window, same limits')
  t.same(limiter.status(), { store: 'redis', degraded: true })
  proxy.thaw()
  // Polls with a check per loop: the ioredis side recovers on its own, a probe notices.
  await until(async () => (await limiter.check('192.0.2.51', 'GET', '/x'), !limiter.status().degraded))
  t.equal(limiter.status().degraded, false, 'recovered after thaw')
  t.equal(logger.infos.length, 1)

  proxy.kill()
  await until(async () => limiter.status().degraded)
  t.equal(limiter.status().degraded, true, 'a lost connection shows without any request')
  t.same(await timedChecks(t, limiter, 2), [false, false], 'killed: the memory block still holds')
  t.equal(limiter.status().degraded, true)
  proxy.thaw()
  await until(async () => (await limiter.check('192.0.2.51', 'GET', '/x'), !limiter.status().degraded))
  t.equal(limiter.status().degraded, false, 'recovered after restart (ioredis reconnected)')
  t.equal(logger.warns.length, 2, 'one warning per outage')
  t.equal(logger.infos.length, 2)
})
