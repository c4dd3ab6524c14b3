import t from 'tap'
import { createInvalidatingCache, DEFAULT_TTL_MS, loadingCache, type InvalidatingCacheOptions } from '../../../src/cache/invalidating-cache.js'
import { fakeNotify, type FakeProcess } from '../../helpers/fake-notify.js'

type Value = { name: string; owner?: string; until?: number }

async function cacheOf(proc: FakeProcess, extra: Partial<InvalidatingCacheOptions<Value>> = {}) {
  const cache = createInvalidatingCache<Value>({ bus: proc.bus, channel: 'c', maxEntries: 100, maxBytes: 1_000_000, sizeOf: () => 100, ...extra })
  await cache.start()
  return cache
}

const loader = (value: Value | undefined) => {
  const calls = { n: 0 }
  return { calls, load: async () => (calls.n++, value) }
}

t.test('loads once, then serves from memory; an invalidation anywhere drops it everywhere', async (t) => {
  const pg = fakeNotify()
  const a = await cacheOf(pg.process())
  const b = await cacheOf(pg.process())
  const { calls, load } = loader({ name: 'v1' })
  await a.get('k', load)
  await a.get('k', load)
  await b.get('k', load)
  t.equal(calls.n, 2, 'one load per process')
  await a.invalidate('k')
  t.equal(a.peek('k'), undefined)
  t.equal(b.peek('k'), undefined, 'the other process dropped it too')
})

t.test('a loading cache loads its own misses by key, once until invalidated', async (t) => {
  const cache = loadingCache(await cacheOf(fakeNotify().process()), async (key) => (key === 'none' ? undefined : (loads.push(key), { name: key })))
  const loads: string[] = []
  t.same([(await cache.get('a'))?.name, (await cache.get('a'))?.name, await cache.get('none')], ['a', 'a', undefined])
  await cache.invalidate('a')
  await cache.get('a')
  t.same(loads, ['a', 'a'])
})

t.test('bounded by entries and by bytes, least recently used out first', async (t) => {
  const proc = fakeNotify().process()
  const byCount = await cacheOf(proc, { maxEntries: 2 })
  for (const k of ['a', 'b']) await byCount.get(k, loader({ name: k }).load)
  byCount.peek('a')
  await byCount.get('c', loader({ name: 'c' }).load)
  t.same([byCount.peek('a')?.name, byCount.peek('b'), byCount.peek('c')?.name], ['a', undefined, 'c'])

  const bySize = await cacheOf(proc, { maxBytes: 1000, sizeOf: (v) => v.name.length })
  await bySize.get('big', loader({ name: 'x'.repeat(600) }).load)
  await bySize.get('big2', loader({ name: 'y'.repeat(600) }).load)
  t.equal(bySize.stats().entries, 1, 'the second big entry pushed the first out')
  t.ok(bySize.stats().bytes <= 1000)
  await bySize.get('huge', loader({ name: 'z'.repeat(5000) }).load)
  t.equal(bySize.peek('huge'), undefined, 'an entry larger than the whole bound is not kept')
})

t.test('an entry ends at its TTL or its own expiry, by the clock it is given', async (t) => {
  const proc = fakeNotify().process()
  let now = 1_000_000
  const clock = () => now
  const cache = await cacheOf(proc, { ttlMs: 5_000, expiresAt: (v) => v.until, clock })
  await cache.get('past', loader({ name: 'p', until: now - 1 }).load)
  t.equal(cache.peek('past'), undefined, 'already expired: not kept')
  await cache.get('soon', loader({ name: 's', until: now + 2_000 }).load)
  await cache.get('later', loader({ name: 'l', until: now + 60_000 }).load)
  now += 1_999
  t.same([cache.peek('soon')?.name, cache.peek('later')?.name], ['s', 'l'])
  now += 1
  t.equal(cache.peek('soon'), undefined, 'gone at its own expiry')
  t.equal(cache.peek('later')?.name, 'l')
  now += 3_000
  t.equal(cache.peek('later'), undefined, 'gone at the TTL, before its own expiry')
  const noTtl = await cacheOf(proc, { ttlMs: 0, clock })
  await noTtl.get('k', loader({ name: 'k' }).load)
  t.equal(noTtl.peek('k'), undefined)
})

t.test('without a TTL of its own an entry still ends by DEFAULT_TTL_MS: an invalidation that never came is bounded', async (t) => {
  let now = 1_000_000
  const cache = await cacheOf(fakeNotify().process(), { clock: () => now })
  await cache.get('k', loader({ name: 'k' }).load)
  now += DEFAULT_TTL_MS * 0.8 - 1
  t.equal(cache.peek('k')?.name, 'k')
  now += DEFAULT_TTL_MS * 0.2
  now += 1
  t.equal(cache.peek('k'), undefined)
})

t.test('a load that raced with an invalidation is returned but not kept', async (t) => {
  const cache = await cacheOf(fakeNotify().process())
  let release!: (v: Value) => void
  const slow = cache.get('k', () => new Promise<Value>((r) => (release = r)))
  await cache.invalidate('k')
  release({ name: 'stale' })
  t.equal((await slow)?.name, 'stale')
  t.equal(cache.peek('k'), undefined)
})

t.test('listener lost: everything dropped and nothing cached; back: dropped again and caching resumes', async (t) => {
  const pg = fakeNotify()
  const proc = pg.process()
  const cache = await cacheOf(proc)
  await cache.get('k', loader({ name: 'v' }).load)
  let release!: (v: Value) => void
  const inFlight = cache.get('late', () => new Promise<Value>((r) => (release = r)))
  proc.listener('lost')
  t.equal(cache.peek('k'), undefined)
  t.equal(cache.stats().caching, false)
  const { calls, load } = loader({ name: 'v' })
  await cache.get('k', load)
  await cache.get('k', load)
  t.equal(calls.n, 2, 'every read loads while the listener is down')
  proc.listener('restored')
  release({ name: 'from before' })
  await inFlight
  t.equal(cache.peek('late'), undefined, 'a load started before the listener came back is not kept')
  t.equal(cache.stats().caching, true)
  await cache.get('k', load)
  await cache.get('k', load)
  t.equal(calls.n, 3, 'cached again')
})

t.test('entries depending on another channel go when it names them', async (t) => {
  const pg = fakeNotify()
  const proc = pg.process()
  const cache = await cacheOf(proc, { dependsOn: { channel: 'owners', keyOf: (v) => v.owner } })
  await cache.get('r1', loader({ name: 'r1', owner: 'app1' }).load)
  await cache.get('r2', loader({ name: 'r2', owner: 'app2' }).load)
  await proc.bus.publish('owners', 'app1')
  t.equal(cache.peek('r1'), undefined)
  t.equal(cache.peek('r2')?.name, 'r2')
})

t.test('a NOTIFY that fails does not fail the caller and is sent once the database takes it', async (t) => {
  const pg = fakeNotify()
  const writer = pg.process()
  const a = await cacheOf(writer)
  const b = await cacheOf(pg.process())
  await b.get('k', loader({ name: 'v' }).load)
  pg.failNotify = true
  await a.invalidate('k')
  t.equal(b.peek('k')?.name, 'v', 'not delivered yet')
  pg.failNotify = false
  for (let i = 0; i < 100 && b.peek('k') !== undefined; i++) await new Promise((r) => setTimeout(r, 50))
  t.equal(b.peek('k'), undefined, 'delivered by the retry')
})

t.test('several keys go in one NOTIFY statement, and a failed one is retried whole', async (t) => {
  const pg = fakeNotify()
  const a = await cacheOf(pg.process())
  const b = await cacheOf(pg.process())
  const keys = ['k1', 'k2', 'k3']
  for (const key of keys) await b.get(key, loader({ name: key }).load)
  await a.invalidate(keys)
  t.equal(pg.sent, 1, 'one statement')
  t.same(keys.map((key) => b.peek(key)), [undefined, undefined, undefined], 'every key dropped in the other process')

  for (const key of keys) await b.get(key, loader({ name: key }).load)
  pg.failNotify = true
  await a.invalidate(keys)
  pg.failNotify = false
  for (let i = 0; i < 100 && keys.some((key) => b.peek(key) !== undefined); i++) await new Promise((r) => setTimeout(r, 50))
  t.same(keys.map((key) => b.peek(key)), [undefined, undefined, undefined], 'delivered by the retry')
  t.equal(pg.sent, 2, 'the retry is one statement too')
  await a.invalidate([])
  t.equal(pg.sent, 2, 'no keys, no statement')
})
