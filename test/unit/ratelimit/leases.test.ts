import t from 'tap'
import { LeaseStore, leaseSize, type BudgetSource } from '../../../src/ratelimit/stores/leases.js'
import type { ScopeGrant } from '../../../src/ratelimit/stores/redis.js'
import type { ScopeHit } from '../../../src/ratelimit/types.js'

/**
 * Redis as the lease script sees it (stores/redis.ts HIT_SCRIPT), on a clock the test moves:
 * a fixed window per IP and scope that grants at most what it has left, and blocks the request
 * that finds nothing left.
 */
function fakeRedis(clock: { now: number }) {
  const windows = new Map<string, { count: number; endsAt: number; blockedUntil: number }>()
  const source: BudgetSource & { calls: number } = {
    calls: 0,
    async take(ip, scopes, wants, carried): Promise<ScopeGrant[]> {
      source.calls++
      await Promise.resolve()
      return scopes.map((rule, i) => {
        const key = `${rule.scope} ${ip}`
        let w = windows.get(key)
        if (!w || (w.endsAt <= clock.now && w.blockedUntil <= clock.now)) windows.set(key, (w = { count: 0, endsAt: clock.now + rule.windowMs, blockedUntil: 0 }))
        if (w.blockedUntil > clock.now) return { blockedMs: w.blockedUntil - clock.now, count: 0, resetMs: w.blockedUntil - clock.now, granted: 0, kept: false }
        const want = wants[i] ?? 1
        const carry = carried[i] ?? 0
        if (carry > 0 && w.count > 0) {
          const topUp = Math.max(0, Math.min(want - carry, rule.limit - w.count))
          w.count += topUp
          return { blockedMs: 0, count: w.count, resetMs: w.endsAt - clock.now, granted: topUp, kept: true }
        }
        const grant = Math.max(1, Math.min(want, rule.limit - w.count))
        w.count += grant
        if (w.count > rule.limit) {
          w.count = 0
          w.endsAt = 0
          w.blockedUntil = clock.now + rule.blockMs
          return { blockedMs: rule.blockMs, count: 0, resetMs: rule.blockMs, granted: 0, kept: false }
        }
        return { blockedMs: 0, count: w.count, resetMs: w.endsAt - clock.now, granted: grant, kept: false }
      })
    },
    close: async () => undefined,
  }
  return source
}

const rule = (limit: number, scope: ScopeHit['scope'] = 'global'): ScopeHit => ({ scope, limit, windowMs: 10_000, blockMs: 10_000 })

async function allowedOf(store: LeaseStore, ip: string, scopes: ScopeHit[], n: number): Promise<number> {
  let allowed = 0
  for (let i = 0; i < n; i++) if ((await store.hit(ip, scopes)).allowed) allowed++
  return allowed
}

t.test('lease size: 1% of the limit (or the percent given), at most 100; one unit under 2', async (t) => {
  t.same([1, 50, 199, 200, 1000, 5000, 1e9].map((limit) => leaseSize(limit)), [1, 1, 1, 2, 10, 50, 100])
  t.same([0, 1, 5, 10].map((percent) => leaseSize(1000, percent)), [1, 10, 50, 100])
})

t.test('percent 0: no leases, one round trip per request', async (t) => {
  const clock = { now: 0 }
  const redis = fakeRedis(clock)
  const store = new LeaseStore(redis, { now: () => clock.now, percent: 0 })
  t.equal(await allowedOf(store, 'a', [rule(1000)], 30), 30)
  t.equal(redis.calls, 30)
})

t.test('one process: exactly the limit passes, the next is refused, with one round trip per lease', async (t) => {
  const clock = { now: 0 }
  const redis = fakeRedis(clock)
  const store = new LeaseStore(redis, { now: () => clock.now })
  t.equal(await allowedOf(store, 'a', [rule(1000)], 1000), 1000)
  t.equal(redis.calls, 100, 'leases of 10')
  const refused = await store.hit('a', [rule(1000)])
  t.match(refused, { allowed: false, scope: 'global', retryAfterMs: 10_000 })
  const calls = redis.calls
  t.equal(await allowedOf(store, 'a', [rule(1000)], 50), 0, 'the block holds')
  t.equal(redis.calls, calls, 'and is remembered: no round trip while it lasts')
  clock.now += 10_001
  t.equal(await allowedOf(store, 'a', [rule(1000)], 1), 1, 'it lifts when it ends')
})

t.test('RateLimit-Remaining counts down by one per request in one process', async (t) => {
  const clock = { now: 0 }
  const store = new LeaseStore(fakeRedis(clock), { now: () => clock.now })
  const remaining: number[] = []
  for (let i = 0; i < 25; i++) remaining.push((await store.hit('a', [rule(1000)])).quota.remaining)
  t.same(remaining, Array.from({ length: 25 }, (_, i) => 999 - i))
})

t.test('several processes: never more than the limit in all; refused at most one lease early per other process', async (t) => {
  const clock = { now: 0 }
  const redis = fakeRedis(clock)
  const stores = [0, 1, 2].map(() => new LeaseStore(redis, { now: () => clock.now }))
  let allowed = 0
  let firstRefusal: number | undefined
  for (let i = 0; i < 1200; i++) {
    const d = await stores[i % 3]!.hit('a', [rule(1000)])
    if (d.allowed) allowed++
    else firstRefusal ??= i
  }
  t.ok(allowed <= 1000, `no more than the limit (${allowed})`)
  t.ok(firstRefusal! >= 1000 - 2 * leaseSize(1000), `the first refusal came after ${firstRefusal} requests`)
})

t.test('a lease never outlives its window, nor leaseMs', async (t) => {
  const clock = { now: 0 }
  const redis = fakeRedis(clock)
  const store = new LeaseStore(redis, { now: () => clock.now, leaseMs: 250 })
  await store.hit('a', [rule(1000)])
  t.equal(redis.calls, 1)
  clock.now += 100
  await store.hit('a', [rule(1000)])
  t.equal(redis.calls, 1, 'units left, within leaseMs: counted here')
  clock.now += 200
  await store.hit('a', [rule(1000)])
  t.equal(redis.calls, 2, 'past leaseMs: Redis is asked again')
  // A window of 200 ms (shorter than leaseMs): its units are not used in the next window.
  const short: ScopeHit = { scope: 'portal', limit: 1000, windowMs: 200, blockMs: 1000 }
  await store.hit('b', [short])
  clock.now += 199
  await store.hit('b', [short])
  t.equal(redis.calls, 3, 'inside its window the lease serves')
  clock.now += 1
  const next = await store.hit('b', [short])
  t.equal(redis.calls, 4, 'the window ended: a new lease in the new window')
  t.equal(next.quota.remaining, 999, 'counted in the new window')
})

t.test('concurrent requests whose lease ran out wait for one take instead of each taking one', async (t) => {
  const clock = { now: 0 }
  const redis = fakeRedis(clock)
  const store = new LeaseStore(redis, { now: () => clock.now })
  const decisions = await Promise.all(Array.from({ length: 50 }, () => store.hit('a', [rule(1000)])))
  t.ok(decisions.every((d) => d.allowed))
  t.equal(redis.calls, 5, 'fifty requests, five leases of ten')
  t.equal((await store.hit('a', [rule(1000)])).quota.remaining, 949, 'no unit was lost')
})

t.test('only the scopes that ran out go to Redis; small limits lease one unit (a round trip each)', async (t) => {
  const clock = { now: 0 }
  const asked: string[][] = []
  const redis = fakeRedis(clock)
  const take = redis.take.bind(redis)
  redis.take = (ip, scopes, wants, carried) => (asked.push(scopes.map((s, i) => `${s.scope}:${wants[i]}`)), take(ip, scopes, wants, carried))
  const store = new LeaseStore(redis, { now: () => clock.now })
  const scopes = [rule(1000), rule(50, 'tokens_search')]
  for (let i = 0; i < 3; i++) await store.hit('a', scopes)
  t.same(asked, [['global:10', 'tokens_search:1'], ['tokens_search:1'], ['tokens_search:1']])
  t.equal(await allowedOf(store, 'a', scopes, 47), 47)
  t.match(await store.hit('a', scopes), { allowed: false, scope: 'tokens_search' }, 'the 51st search is refused exactly')
})

t.test('leases are bounded in number', async (t) => {
  const clock = { now: 0 }
  const store = new LeaseStore(fakeRedis(clock), { now: () => clock.now, maxLeases: 100 })
  for (let i = 0; i < 500; i++) await store.hit(`ip-${i}`, [rule(1000)])
  const size = (store as unknown as { leases: Map<string, unknown> }).leases.size
  t.ok(size <= 100, `${size} leases kept`)
})

t.test('a failed take leaves nothing behind: the next request asks again', async (t) => {
  const clock = { now: 0 }
  const redis = fakeRedis(clock)
  const store = new LeaseStore(redis, { now: () => clock.now })
  const take = redis.take.bind(redis)
  redis.take = () => Promise.reject(new Error('connection lost'))
  await t.rejects(store.hit('a', [rule(1000)]), /connection lost/)
  redis.take = take
  t.match(await store.hit('a', [rule(1000)]), { allowed: true, quota: { remaining: 999 } })
})

t.test('requests waiting on a take that fails fail with it, instead of each asking again in turn', async (t) => {
  const clock = { now: 0 }
  const redis = fakeRedis(clock)
  let takes = 0
  redis.take = async () => {
    takes++
    await new Promise((resolve) => setTimeout(resolve, 20))
    throw new Error('command timed out')
  }
  const store = new LeaseStore(redis, { now: () => clock.now })
  const results = await Promise.allSettled(Array.from({ length: 20 }, () => store.hit('a', [rule(1000)])))
  t.ok(results.every((r) => r.status === 'rejected'), 'every one is told, so the caller can fall back at once')
  t.equal(takes, 1, 'one take for the twenty, not one after another')
})

t.test('a client slower than the lease time loses no budget: the unused units carry into the next lease', async (t) => {
  const clock = { now: 0 }
  const redis = fakeRedis(clock)
  const store = new LeaseStore(redis, { now: () => clock.now })
  const slow: ScopeHit = { scope: 'global', limit: 1000, windowMs: 600_000, blockMs: 10_000 }
  let allowed = 0
  for (let i = 0; i < 1000; i++) {
    if ((await store.hit('a', [slow])).allowed) allowed++
    clock.now += 300
  }
  t.equal(allowed, 1000, 'every request within the limit passes, each after its lease ran out of time')
  t.match(await store.hit('a', [slow]), { allowed: false }, 'the first one over the limit is refused')
  clock.now = 600_001 + 10_000
  t.ok((await store.hit('a', [slow])).allowed, 'a new window')
})
