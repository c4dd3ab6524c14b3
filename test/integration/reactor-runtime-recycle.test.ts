import t from 'tap'
import { ECHO, startRuntime } from '../fixtures/reactors/harness.js'

// Each call ends with 9 MB still reachable in a 16 MB isolate: a closure waits on a tokenize
// call the host never answers, until the next call starts (and forgets answers still owed).
// So when the heap check runs after a call, the heap is surely past half the limit, whatever
// V8's garbage collector did meanwhile; the warm isolate is recycled (a fresh one next time)
// instead of dying mid-call, and every call succeeds.
const HOLDS_9_MB = `module.exports = async ({ svc }) => {
  const held = []
  for (let i = 0; i < 9; i++) held.push(new Array(131072).fill(i))
  svc.tokenize({ type: 'token', data: 'x' }).then(() => held.length)
  return { raw: held.length }
}`

t.test('a warm isolate past half its memory limit is recycled, and every call still succeeds', async (t) => {
  const never = new Promise<never>(() => undefined)
  const rt = await startRuntime(t, { memoryMb: 16, hotConcurrency: 1, timeoutMs: 10_000 }, { tokenize: () => never })
  for (let i = 0; i < 8; i++) {
    t.same(await rt.run(HOLDS_9_MB), { kind: 'ok', value: { raw: 9 } }, `call ${i + 1}`)
    // The heap check runs after a call, asynchronously: idle a moment now and then.
    if (i % 2) await new Promise((r) => setTimeout(r, 50))
  }
  t.ok(rt.sup.stats().coldStarts > 1, `recycled at least once (${rt.sup.stats().coldStarts} cold starts in 8 calls)`)
  t.same(await rt.run(ECHO, { a: 1 }), { kind: 'ok', value: { raw: { a: 1 } } }, 'the runtime serves other Reactors as before')
})
