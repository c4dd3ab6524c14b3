import t from 'tap'
import { ECHO, fixture, Gate, startRuntime } from '../fixtures/reactors/harness.js'

t.test('N simultaneous calls with hot concurrency 1: all succeed, N - 1 cold starts', async (t) => {
  const n = 8
  const gate = new Gate()
  const rt = await startRuntime(t, { hotConcurrency: 1, timeoutMs: 10_000 }, { tokenize: gate.pass })
  const code = fixture('barrier.js')
  t.same(await rt.run(code, { n: -1 }), { kind: 'ok', value: { raw: -1 } }, 'warm-up: the one hot isolate exists')
  const before = rt.sup.stats()
  gate.arm(n)
  const results = await Promise.all(Array.from({ length: n }, (_, i) => rt.run(code, { n: i })))
  t.same(results, Array.from({ length: n }, (_, i) => ({ kind: 'ok', value: { raw: i } })))
  const after = rt.sup.stats()
  t.equal(after.warmStarts - before.warmStarts, 1, 'one call used the warm isolate')
  t.equal(after.coldStarts - before.coldStarts, n - 1, 'the rest started cold, concurrently')
  const coldLogs = rt.logs.filter((l) => l.msg === 'reactor cold start')
  t.equal(coldLogs.length, n, 'every cold start (warm-up included) is logged')
  t.same(await rt.run(code, { n: 99 }), { kind: 'ok', value: { raw: 99 } })
  t.equal(rt.sup.stats().coldStarts, after.coldStarts, 'no new cold start: the hot isolate (or a kept extra) serves again')
})

t.test('hot concurrency 2 keeps two warm isolates', async (t) => {
  const gate = new Gate()
  const rt = await startRuntime(t, { hotConcurrency: 2, timeoutMs: 10_000 }, { tokenize: gate.pass })
  const code = fixture('barrier.js')
  gate.arm(2)
  await Promise.all([rt.run(code, { n: 1 }), rt.run(code, { n: 2 })])
  gate.arm(2)
  await Promise.all([rt.run(code, { n: 3 }), rt.run(code, { n: 4 })])
  t.match(rt.sup.stats(), { coldStarts: 2, warmStarts: 2, restarts: 0 })
})

t.test('hot concurrency 0: every call is cold', async (t) => {
  const rt = await startRuntime(t, { hotConcurrency: 0 })
  for (let i = 0; i < 3; i++) await rt.run(ECHO, i)
  t.match(rt.sup.stats(), { coldStarts: 3, warmStarts: 0, restarts: 0 })
})

t.test('a new version retires the old warm isolates and runs the new code', async (t) => {
  const rt = await startRuntime(t)
  const v1 = 'module.exports = async () => "one"'
  const v2 = 'module.exports = async () => "two"'
  const call = (code: string, version: string) => rt.run(code, {}, { reactorId: 'r', version })
  t.same(await call(v1, 'v1'), { kind: 'ok', value: 'one' })
  t.same(await call(v1, 'v1'), { kind: 'ok', value: 'one' })
  t.same(await call(v2, 'v2'), { kind: 'ok', value: 'two' })
  t.same(await call(v2, 'v2'), { kind: 'ok', value: 'two' })
  t.match(rt.sup.stats(), { coldStarts: 2, warmStarts: 2, restarts: 0 })
  t.same(await call(v1, 'v1'), { kind: 'ok', value: 'one' })
  t.equal(rt.sup.stats().coldStarts, 3, 'v1 was retired: running it again starts cold')
})

t.test('retire drops a deleted Reactor\'s warm isolates', async (t) => {
  const rt = await startRuntime(t)
  await rt.run(ECHO, 1, { reactorId: 'gone' })
  await rt.run(ECHO, 2, { reactorId: 'gone' })
  rt.sup.retire('gone')
  await rt.run(ECHO, 3, { reactorId: 'gone' })
  t.match(rt.sup.stats(), { coldStarts: 2, warmStarts: 1, restarts: 0 })
})

t.test('calls spread over several workers keep their per-Reactor warm isolates', async (t) => {
  const rt = await startRuntime(t, { workers: 2 })
  for (let round = 0; round < 3; round++) {
    await Promise.all(['a', 'b', 'c', 'd'].map((id) => rt.run(ECHO, round, { reactorId: id })))
  }
  t.match(rt.sup.stats(), { coldStarts: 4, warmStarts: 8, restarts: 0 }, 'each Reactor stays pinned to the worker holding its isolate')
})
