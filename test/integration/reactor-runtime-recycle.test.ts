import t from 'tap'
import { ECHO, startRuntime } from '../fixtures/reactors/harness.js'

// Each call leaves ~8 MB on the heap of a 16 MB isolate until V8 collects it: past half the
// limit, the warm isolate is recycled (a fresh one next time) instead of dying mid-call.
const HEAVY = 'module.exports = async () => { const a = []; for (let i = 0; i < 100; i++) a.push(new Array(10000).fill(i)); return { raw: a.length } }'

t.test('a warm isolate past half its memory limit is recycled, and every call still succeeds', async (t) => {
  const rt = await startRuntime(t, { memoryMb: 16, hotConcurrency: 1, timeoutMs: 10_000 })
  for (let i = 0; i < 12; i++) {
    t.same(await rt.run(HEAVY), { kind: 'ok', value: { raw: 100 } }, `call ${i + 1}`)
    // Idle for a moment now and then: the heap check runs between calls, asynchronously (150 ms:
    // under the parallel CI load, 20 ms was sometimes too short for it to finish).
    if (i % 2) await new Promise((r) => setTimeout(r, 150))
  }
  t.ok(rt.sup.stats().coldStarts > 1, `recycled at least once (${rt.sup.stats().coldStarts} cold starts in 12 calls)`)
  t.same(await rt.run(ECHO, { a: 1 }), { kind: 'ok', value: { raw: { a: 1 } } }, 'the runtime serves other Reactors as before')
})
