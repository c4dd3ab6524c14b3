import t, { type Test } from 'tap'
import { MemoryStore } from '../../../src/ratelimit/stores/memory.js'
import { RedisStore } from '../../../src/ratelimit/stores/redis.js'
import type { RateLimitStore, ScopeHit } from '../../../src/ratelimit/types.js'
import { fakeClock, keyTtls, REDIS_URL, skipWithoutRedis, sleep, uniquePrefix } from '../../helpers/ratelimit.js'

/** The same window and block rules, run against each store; Redis needs real (short) time. */
interface Subject {
  store: RateLimitStore
  advance: (ms: number) => Promise<void>
}

const WINDOW = 200
const BLOCK = 300
const global: ScopeHit = { scope: 'global', limit: 3, windowMs: WINDOW, blockMs: BLOCK }
const search: ScopeHit = { scope: 'tokens_search', limit: 1, windowMs: WINDOW, blockMs: BLOCK }

async function hits(store: RateLimitStore, ip: string, scopes: ScopeHit[], n: number) {
  const out = []
  for (let i = 0; i < n; i++) out.push(await store.hit(ip, scopes))
  return out
}

function contract(t: Test, make: (t: Test) => Promise<Subject>) {
  t.test('every decision carries the quota of the tightest scope', async (t) => {
    const { store } = await make(t)
    const remaining = (await hits(store, '192.0.2.20', [global], 3)).map((d) => d.quota.remaining)
    t.same(remaining, [2, 1, 0], 'counts down to 0 at the limit')
    const first = await store.hit('192.0.2.21', [global])
    t.equal(first.quota.limit, 3)
    t.ok(first.quota.resetMs > 0 && first.quota.resetMs <= WINDOW, `reset within the window (${first.quota.resetMs} ms)`)
    const both = await store.hit('192.0.2.22', [global, search])
    t.match(both.quota, { limit: 1, remaining: 0 }, 'the route scope is tighter than global')
    const denied = await store.hit('192.0.2.22', [global, search])
    t.match(denied, { allowed: false, scope: 'tokens_search' })
    if (!denied.allowed) t.same(denied.quota, { limit: 1, remaining: 0, resetMs: denied.retryAfterMs }, 'a denied request resets when its block ends')
  })

  t.test('exactly the limit passes, the next is denied, the block holds then lifts', async (t) => {
    const { store, advance } = await make(t)
    const passed = await hits(store, '192.0.2.1', [global], 3)
    t.ok(passed.every((d) => d.allowed), 'limit requests pass')
    const denied = await store.hit('192.0.2.1', [global])
    t.match(denied, { allowed: false, scope: 'global' })
    if (!denied.allowed) t.ok(denied.retryAfterMs > 0 && denied.retryAfterMs <= BLOCK, 'retry after within the block')
    await advance(WINDOW + 20)
    t.match(await store.hit('192.0.2.1', [global]), { allowed: false }, 'the block outlasts the window')
    await advance(BLOCK)
    const after = await hits(store, '192.0.2.1', [global], 4)
    t.same(after.map((d) => d.allowed), [true, true, true, false], 'a fresh window after the block')
  })

  t.test('a window that ends without overflow resets the count', async (t) => {
    const { store, advance } = await make(t)
    await hits(store, '192.0.2.2', [global], 3)
    await advance(WINDOW + 20)
    const next = await hits(store, '192.0.2.2', [global], 3)
    t.ok(next.every((d) => d.allowed))
  })

  t.test('scopes are independent, and so are IPs', async (t) => {
    const { store } = await make(t)
    t.match(await store.hit('192.0.2.3', [global, search]), { allowed: true })
    t.match(await store.hit('192.0.2.3', [global, search]), { allowed: false, scope: 'tokens_search' })
    t.match(await store.hit('192.0.2.3', [global]), { allowed: true }, 'other routes of the IP still pass')
    t.match(await store.hit('192.0.2.4', [global, search]), { allowed: true }, 'another IP is not blocked')
    t.match(await store.hit('192.0.2.3', [global]), { allowed: false, scope: 'global' }, 'every request counted in global')
  })
}

t.test('memory store', async (t) => {
  contract(t, async () => {
    const clock = fakeClock()
    return { store: new MemoryStore({ now: clock.now }), advance: async (ms) => clock.advance(ms) }
  })

  t.test('expired windows are swept', async (t) => {
    const clock = fakeClock()
    const store = new MemoryStore({ now: clock.now, sweepIntervalMs: 1000 })
    for (let i = 0; i < 50; i++) await store.hit(`198.51.100.${i}`, [global])
    t.equal(store.size, 50)
    clock.advance(1000)
    await store.hit('198.51.100.200', [global])
    t.equal(store.size, 1)
  })
})

t.test('redis store', { skip: await skipWithoutRedis() }, async (t) => {
  const makeRedis = async (t: Test, keyPrefix: string) => {
    const store = new RedisStore({ url: REDIS_URL, commandTimeoutMs: 1000, keyPrefix })
    t.teardown(() => store.close())
    return store
  }
  contract(t, async (t) => ({ store: await makeRedis(t, uniquePrefix(t)), advance: sleep }))

  t.test('one hit is one Redis command, whatever the number of scopes', async (t) => {
    const store = await makeRedis(t, uniquePrefix(t))
    await store.hit('192.0.2.30', [global])
    // The client is private; counting what it sends is the point of this test.
    const client = (store as unknown as { client: { sendCommand: (...args: unknown[]) => unknown } }).client
    const sent: string[] = []
    const original = client.sendCommand.bind(client)
    client.sendCommand = (...args: unknown[]) => {
      sent.push(String((args[0] as { name: string }).name))
      return original(...args)
    }
    const decision = await store.hit('192.0.2.30', [global, search])
    t.equal(sent.length, 1, `one command (${sent.join(', ')})`)
    t.match(decision.quota, { limit: 1, remaining: 0 }, 'and it brought the quota')
  })

  t.test('a lease\'s carried units: used while their window lasts, void once it ended', async (t) => {
    const store = await makeRedis(t, uniquePrefix(t))
    const wide: ScopeHit = { ...global, limit: 100, windowMs: 400 }
    const [first] = await store.take('192.0.2.40', [wide], [10], [])
    t.match(first, { granted: 10, kept: false, count: 10 })
    const [carry] = await store.take('192.0.2.40', [wide], [10], [4])
    t.match(carry, { granted: 6, kept: true, count: 16 }, 'four carried, six more to make a lease of ten: the window counts only those')
    await sleep(450)
    const [fresh] = await store.take('192.0.2.40', [wide], [10], [4])
    t.match(fresh, { granted: 10, kept: false, count: 10 }, 'the window ended: the carried units are void, a new lease is counted')
  })

  t.test('keys expire on Redis', async (t) => {
    const prefix = uniquePrefix(t)
    const store = await makeRedis(t, prefix)
    await hits(store, '2001:db8::1', [global, search], 2)
    const ttls = await keyTtls(prefix)
    t.equal(ttls.length, 2, 'global counter and search block (its counter is dropped)')
    t.ok(ttls.every((ms) => ms > 0 && ms <= BLOCK), 'every key has a TTL')
  })

  t.test('a burst while the connection opens waits for it, once', async (t) => {
    const store = await makeRedis(t, uniquePrefix(t))
    const wide: ScopeHit = { ...global, limit: 1000 }
    const burst = await Promise.all(Array.from({ length: 50 }, (_, i) => store.hit(`192.0.2.${i}`, [wide])))
    t.ok(burst.every((d) => d.allowed), 'answered by Redis, not refused while connecting')
  })

  t.test('two stores on one Redis share the count', async (t) => {
    const prefix = uniquePrefix(t)
    const a = await makeRedis(t, prefix)
    const b = await makeRedis(t, prefix)
    const decisions = [await a.hit('192.0.2.9', [global]), await b.hit('192.0.2.9', [global]), await a.hit('192.0.2.9', [global])]
    t.ok(decisions.every((d) => d.allowed))
    t.match(await b.hit('192.0.2.9', [global]), { allowed: false, scope: 'global' })
    t.match(await a.hit('192.0.2.9', [global]), { allowed: false }, 'the block is shared too')
  })
})
