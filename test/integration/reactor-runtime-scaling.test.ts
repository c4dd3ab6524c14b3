import t from 'tap'
import { testConfig } from '../../src/config/index.js'
import { ECHO, fixture, Gate, startRuntime } from '../fixtures/reactors/harness.js'

// Scale-out (issue 15): isolates started cold for concurrent calls stay warm for the idle window,
// up to the per-Reactor bound, then the pool shrinks back to hot concurrency. The idle window's
// clock is the test's own, and `sweep()` applies it: no waiting for timers.

const defaults = testConfig().reactors
const warm = (over: Partial<typeof defaults.warm>) => ({ warm: { ...defaults.warm, ...over } })

/** `n` barrier calls in flight together (each Reactor id its own), then their start kinds. */
async function burst(rt: Awaited<ReturnType<typeof startRuntime>>, gate: Gate, n: number, reactorId = 'burst') {
  const before = rt.sup.stats()
  gate.arm(n)
  const results = await Promise.all(Array.from({ length: n }, (_, i) => rt.run(fixture('barrier.js'), { n: i }, { reactorId })))
  const after = rt.sup.stats()
  return { results, warm: after.warmStarts - before.warmStarts, cold: after.coldStarts - before.coldStarts }
}

t.test('isolates started for concurrent calls stay warm, and go after the idle window', async (t) => {
  let now = 0
  const gate = new Gate()
  const rt = await startRuntime(t, { hotConcurrency: 1, timeoutMs: 10_000, ...warm({ perReactor: 4, idleMs: 60_000 }) }, { tokenize: gate.pass }, { now: () => now })
  t.same(await burst(rt, gate, 1), { results: [{ kind: 'ok', value: { raw: 0 } }], warm: 0, cold: 1 }, 'the hot isolate')
  t.match(await burst(rt, gate, 4), { warm: 1, cold: 3 }, 'three more start cold...')
  t.equal(rt.sup.load().warm, 4, '...and stay warm')
  t.match(await burst(rt, gate, 4), { warm: 4, cold: 0 }, 'so the next burst is all warm')
  now += 30_000
  rt.sup.sweep()
  t.equal(rt.sup.load().warm, 4, 'not idle for the window yet')
  now += 30_001
  rt.sup.sweep()
  t.equal(rt.sup.load().warm, 1, 'back to hot concurrency')
  t.match(await burst(rt, gate, 4), { warm: 1, cold: 3 })
  now += 3_600_000
  rt.sup.sweep()
  t.equal(rt.sup.load().warm, 1, 'the hot isolate stays for good')
  t.match(await burst(rt, gate, 1), { warm: 1, cold: 0 })
})

t.test('at most the per-Reactor bound stays warm; an idle window of 0 keeps only hot concurrency', async (t) => {
  const gate = new Gate()
  const rt = await startRuntime(t, { hotConcurrency: 1, timeoutMs: 10_000, ...warm({ perReactor: 2 }) }, { tokenize: gate.pass })
  t.match(await burst(rt, gate, 4), { warm: 0, cold: 4 })
  t.equal(rt.sup.load().warm, 2)
  t.match(await burst(rt, gate, 4), { warm: 2, cold: 2 })
  const none = await startRuntime(t, { hotConcurrency: 1, timeoutMs: 10_000, ...warm({ idleMs: 0 }) }, { tokenize: gate.pass })
  t.match(await burst(none, gate, 3), { warm: 0, cold: 3 })
  t.match(await burst(none, gate, 3), { warm: 1, cold: 2 }, 'SPEC 8.2: extra concurrent calls start cold')
})

t.test('the total bound: a new Reactor takes the place of the least recently used idle one', async (t) => {
  const rt = await startRuntime(t, { hotConcurrency: 1, ...warm({ perReactor: 2, total: 2 }) })
  await rt.run(ECHO, 1, { reactorId: 'a' })
  await rt.run(ECHO, 1, { reactorId: 'b' })
  t.equal(rt.sup.load().warm, 2)
  await rt.run(ECHO, 1, { reactorId: 'c' })
  t.equal(rt.sup.load().warm, 2, 'never more than the total')
  await rt.run(ECHO, 2, { reactorId: 'b' })
  await rt.run(ECHO, 2, { reactorId: 'c' })
  t.match(rt.sup.stats(), { coldStarts: 3, warmStarts: 2, restarts: 0 }, 'b and c still warm')
  await rt.run(ECHO, 2, { reactorId: 'a' })
  t.match(rt.sup.stats(), { coldStarts: 4, warmStarts: 2, restarts: 0 }, 'a was evicted for c')
})

t.test('with two workers, one Reactor\'s warm isolates serve on both', async (t) => {
  const gate = new Gate()
  const rt = await startRuntime(t, { workers: 2, hotConcurrency: 1, timeoutMs: 10_000, ...warm({ perReactor: 4 }) }, { tokenize: gate.pass })
  t.match(await burst(rt, gate, 4), { cold: 4 })
  t.match(await burst(rt, gate, 4), { warm: 4, cold: 0 }, 'the isolates on either worker are found again')
})
