import t from 'tap'
import { WarmPool, type Slot, type WarmLimits } from '../../../src/reactors/scheduling/warm-pool.js'

function pool(over: Partial<WarmLimits> = {}, lanes = 2) {
  let now = 1000
  const p = new WarmPool({ hotConcurrency: 1, perReactor: 3, total: 10, idleMs: 60_000, ...over }, lanes, () => now)
  return { p, advance: (ms: number) => (now += ms) }
}

/** `n` calls of `reactorId` in flight together; returns their slots (checked out, not back yet). */
function concurrent(p: WarmPool, reactorId: string, n: number, version = 'v1'): { slot: Slot; fresh: boolean; drops: Slot[] }[] {
  return Array.from({ length: n }, () => p.checkout(reactorId, version))
}

t.test('concurrent calls start cold isolates that stay warm up to the per-Reactor bound', async (t) => {
  const { p } = pool()
  const first = concurrent(p, 'r', 4)
  t.same(first.map((c) => c.fresh), [true, true, true, true])
  t.same(first.map((c) => c.slot.kept), [true, true, true, false], 'the fourth is beyond perReactor 3: disposed after its call')
  for (const c of first) p.checkin(c.slot, true)
  t.equal(p.stats().warm, 3)
  const second = concurrent(p, 'r', 3)
  t.same(second.map((c) => c.fresh), [false, false, false], 'all three warm now')
})

t.test('cold starts spread over the lanes; warm calls take the most recently used isolate', async (t) => {
  const { p, advance } = pool({}, 2)
  const [a, b] = concurrent(p, 'r', 2)
  t.not(a!.slot.lane, b!.slot.lane, 'one isolate per lane: one Reactor uses both worker threads')
  p.checkin(a!.slot, true)
  advance(10)
  p.checkin(b!.slot, true)
  t.equal(p.checkout('r', 'v1').slot, b!.slot, 'the most recent one serves, so the other can idle out')
})

t.test('after the idle window the pool shrinks back to hot concurrency, most idle first', async (t) => {
  const { p, advance } = pool({ hotConcurrency: 1, perReactor: 3, idleMs: 60_000 })
  const calls = concurrent(p, 'r', 3)
  for (const c of calls) p.checkin(c.slot, true)
  advance(30_000)
  t.same(p.sweep(), [], 'not idle long enough')
  const again = p.checkout('r', 'v1')
  p.checkin(again.slot, true)
  advance(30_001)
  const dropped = p.sweep()
  t.equal(dropped.length, 2, 'two extras idle for the window')
  t.notOk(dropped.includes(again.slot), 'the recently used one stays')
  t.equal(p.stats().warm, 1)
  advance(3_600_000)
  t.same(p.sweep(), [], 'hot isolates stay for good')
})

t.test('idle window 0: only hot concurrency is kept; hot concurrency 0: nothing is', async (t) => {
  const noExtras = pool({ idleMs: 0 }).p
  t.same(concurrent(noExtras, 'r', 2).map((c) => c.slot.kept), [true, false])
  const none = pool({ hotConcurrency: 0 }).p
  t.same(concurrent(none, 'r', 2).map((c) => c.slot.kept), [false, false])
})

t.test('the total bound evicts the least recently used idle isolate, never a busy one', async (t) => {
  const { p, advance } = pool({ total: 2 })
  const a = p.checkout('a', 'v1')
  p.checkin(a.slot, true)
  advance(1)
  const b = p.checkout('b', 'v1')
  p.checkin(b.slot, true)
  advance(1)
  const c = p.checkout('c', 'v1')
  t.same(c.drops, [a.slot], 'a was idle longest')
  t.ok(c.slot.kept)
  t.equal(p.stats().warm, 2)
  const d = p.checkout('b', 'v1')
  t.equal(d.slot, b.slot, 'b warm')
  const e = p.checkout('e', 'v1')
  t.same(e.drops, [], 'b and c are busy: nothing to evict')
  t.notOk(e.slot.kept, 'so the new isolate is cold')
  t.equal(p.stats().warm, 2)
})

t.test('a new version retires the old isolates: idle ones now, busy ones after their call', async (t) => {
  const { p } = pool()
  const [x, y] = concurrent(p, 'r', 2)
  p.checkin(x!.slot, true)
  const next = p.checkout('r', 'v2')
  t.same(next.drops, [x!.slot])
  t.ok(next.fresh)
  t.equal(p.checkin(y!.slot, true), y!.slot, 'the busy v1 isolate is dropped when its call ends')
  t.equal(p.stats().warm, 1, 'only the v2 isolate')
})

t.test('retire, and isolates the worker could not keep', async (t) => {
  const { p } = pool()
  const a = p.checkout('r', 'v1')
  p.checkin(a.slot, false)
  t.equal(p.stats().warm, 0, 'timed out or outgrew its heap: gone from the ledger')
  const b = p.checkout('r', 'v1')
  t.ok(b.fresh)
  p.checkin(b.slot, true)
  t.same(p.retire('r'), [b.slot])
  t.same(p.stats(), { warm: 0, reactors: 0 })
})
