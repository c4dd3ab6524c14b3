import t from 'tap'
import { createInvalidatingCache, type InvalidatingCacheOptions } from '../../../src/cache/invalidating-cache.js'
import { EVERY_KEY } from '../../../src/cache/invalidation-bus.js'
import { fakeNotify, type FakeProcess } from '../../helpers/fake-notify.js'

type Value = { name: string; owner?: string }

async function cacheOf(proc: FakeProcess, extra: Partial<InvalidatingCacheOptions<Value>> = {}) {
  const cache = createInvalidatingCache<Value>({ bus: proc.bus, channel: 'c', maxEntries: 1_000, maxBytes: 1_000_000, sizeOf: () => 100, ...extra })
  await cache.start()
  return cache
}

/** Loads that answer when the test says so (`release(n)` the n-th started); `releases.length` counts them. */
function gated() {
  const releases: ((value: Value | undefined) => void)[] = []
  return {
    releases,
    release: (n: number, value: Value) => releases[n]?.(value),
    load: () => new Promise<Value | undefined>((resolve) => releases.push(resolve)),
  }
}

const owned = { dependsOn: { channel: 'owners', keyOf: (v: Value) => v.owner } }

t.test('an invalidation of another key during a load does not keep the load out of the cache', async (t) => {
  const proc = fakeNotify().process()
  const cache = await cacheOf(proc)
  const { release, load } = gated()
  const slow = cache.get('k', load)
  await cache.invalidate('other')
  release(0, { name: 'v' })
  await slow
  t.equal(cache.peek('k')?.name, 'v')

  const seen = cache.generation()
  await cache.invalidate('another')
  cache.put('p', { name: 'p' }, seen)
  t.equal(cache.peek('p')?.name, 'p', 'put by generation, too')
  await cache.invalidate('p')
  cache.put('p', { name: 'stale' }, seen)
  t.equal(cache.peek('p'), undefined, 'but not when its own key was invalidated since')
})

t.test('a load is still not kept when its key, every key, or (many) unknown keys were invalidated during it', async (t) => {
  const proc = fakeNotify().process()
  const cache = await cacheOf(proc)
  for (const invalidation of [async () => cache.invalidate('k'), async () => cache.invalidate(EVERY_KEY), async () => { for (let i = 0; i < 5_000; i++) await cache.invalidate(`x${i}`) }]) {
    const { release, load } = gated()
    const slow = cache.get('k', load)
    await invalidation()
    release(0, { name: 'stale' })
    t.equal((await slow)?.name, 'stale', 'returned to the caller that loaded it')
    t.equal(cache.peek('k'), undefined)
  }
})

t.test('a dependent entry loaded during an invalidation of what it depends on is not kept; of something else, it is', async (t) => {
  const proc = fakeNotify().process()
  const cache = await cacheOf(proc, owned)
  const { release, load } = gated()
  const r1 = cache.get('r1', load)
  const r2 = cache.get('r2', load)
  await proc.bus.publish('owners', 'app1')
  release(0, { name: 'r1', owner: 'app1' })
  release(1, { name: 'r2', owner: 'app2' })
  await Promise.all([r1, r2])
  t.equal(cache.peek('r1'), undefined, 'its owner changed while it loaded')
  t.equal(cache.peek('r2')?.name, 'r2')
  await proc.bus.publish('owners', 'app2')
  t.equal(cache.peek('r2'), undefined, 'cached, it goes when its owner does')
})

t.test('a dependent invalidation finds its entries by key, without a pass over every entry', async (t) => {
  const proc = fakeNotify().process()
  let calls = 0
  const cache = await cacheOf(proc, { dependsOn: { channel: 'owners', keyOf: (v) => (calls++, v.owner) } })
  for (let i = 0; i < 100; i++) await cache.get(`r${i}`, async () => ({ name: `r${i}`, owner: `app${i % 10}` }))
  calls = 0
  await proc.bus.publish('owners', 'app3')
  t.equal(calls, 0)
  t.equal(cache.stats().entries, 90)
  t.equal(cache.peek('r13'), undefined)
  t.equal(cache.peek('r14')?.name, 'r14')
  await proc.bus.publish('owners', EVERY_KEY)
  t.equal(cache.stats().entries, 0)
})

t.test('concurrent misses of a key share one load', async (t) => {
  const proc = fakeNotify().process()
  const cache = await cacheOf(proc)
  await cache.get('k', async () => ({ name: 'v0' }))
  await cache.invalidate(EVERY_KEY)
  const { releases, release, load } = gated()
  const all = Promise.all(Array.from({ length: 200 }, () => cache.get('k', load)))
  t.equal(releases.length, 1)
  release(0, { name: 'v1' })
  t.same(new Set((await all).map((v) => v?.name)), new Set(['v1']))
  t.equal(cache.peek('k')?.name, 'v1')
})

t.test('a miss after an invalidation of its key does not get the load that started before it', async (t) => {
  const proc = fakeNotify().process()
  const cache = await cacheOf(proc)
  const { releases, release, load } = gated()
  const before = cache.get('k', load)
  await cache.invalidate('k')
  const after = cache.get('k', load)
  t.equal(releases.length, 2, 'a load of its own')
  release(0, { name: 'stale' })
  release(1, { name: 'fresh' })
  t.equal((await before)?.name, 'stale')
  t.equal((await after)?.name, 'fresh')
  t.equal(cache.peek('k')?.name, 'fresh')
})

t.test('a miss that joined a load raced by a dependent invalidation loads again', async (t) => {
  const proc = fakeNotify().process()
  const cache = await cacheOf(proc, owned)
  const { releases, release, load } = gated()
  const before = cache.get('r', load)
  await proc.bus.publish('owners', 'app1')
  const after = cache.get('r', load)
  release(0, { name: 'stale', owner: 'app1' })
  for (let i = 0; i < 10 && releases.length < 2; i++) await new Promise((r) => setImmediate(r))
  t.equal(releases.length, 2)
  release(1, { name: 'fresh', owner: 'app1' })
  t.equal((await before)?.name, 'stale')
  t.equal((await after)?.name, 'fresh')
  t.equal(cache.peek('r')?.name, 'fresh')
})

t.test('entries loaded together end at different times, none later than the TTL', async (t) => {
  let now = 1_000_000
  const cache = await cacheOf(fakeNotify().process(), { ttlMs: 10_000, clock: () => now })
  const keys = Array.from({ length: 200 }, (_, i) => `k${i}`)
  for (const key of keys) await cache.get(key, async () => ({ name: key }))
  const left = () => keys.filter((key) => cache.peek(key) !== undefined).length
  now += 7_999
  t.equal(left(), 200, 'none before 80% of the TTL')
  now += 1_000
  const some = left()
  t.ok(some > 0 && some < 200, `some left at 90% of the TTL (${some})`)
  now += 1_001
  t.equal(left(), 0)
})
