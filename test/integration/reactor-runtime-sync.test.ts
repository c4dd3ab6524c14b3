import t from 'tap'
import { SYNC_BUDGET_MS } from '../../src/reactors/runtime/child/invocation.js'
import { ECHO, startRuntime } from '../fixtures/reactors/harness.js'

// A warm isolate's calls run on the worker thread itself (child/invocation.ts, runSync) for at
// most SYNC_BUDGET_MS; a call past that starts again asynchronously, as if it had never run.

const BUSY = `module.exports = async (req) => {
  const made = req.svc.tokenize(req.args.n)
  const until = Date.now() + req.args.busyMs
  while (Date.now() < until) {}
  return { token: await made }
}`

t.test('a call that runs synchronously past the budget starts again: the same result, its bridge calls made once', async (t) => {
  const seen: unknown[] = []
  const rt = await startRuntime(t, {}, { tokenize: async (_ctx, value) => (seen.push(value), { id: `tok_${String(value)}` }) })
  const call = async (n: number, busyMs: number) => t.same(await rt.run(BUSY, { n, busyMs }), { kind: 'ok', value: { token: { id: `tok_${n}` } } })
  await call(1, 0) // cold: asynchronous
  await call(2, 0) // synchronous, then waits for its bridge call
  t.equal(rt.sup.stats().syncOverruns, 0)
  await call(3, 4 * SYNC_BUDGET_MS) // stopped at the budget, started again
  t.equal(rt.sup.stats().syncOverruns, 1)
  await call(4, 4 * SYNC_BUDGET_MS) // this isolate now runs asynchronously only
  await call(5, 0)
  t.same(rt.sup.stats(), { coldStarts: 1, warmStarts: 4, restarts: 0, syncOverruns: 1 }, 'one isolate served every call')
  t.same(seen, [1, 2, 3, 4, 5], 'each call reached the host once: the stopped run\'s bridge call was never posted')
})

t.test('a quick Reactor that starts spinning holds its lane for the budget, not for its deadline', async (t) => {
  const rt = await startRuntime(t, { timeoutMs: 2000, workers: 1 })
  const code = 'module.exports = async (req) => { if (req.args.spin) for (;;) {} return "quick" }'
  t.same(await rt.run(code, {}, { tenantId: 'hostile' }), { kind: 'ok', value: 'quick' })
  t.same(await rt.run(code, {}, { tenantId: 'hostile' }), { kind: 'ok', value: 'quick' }, 'warm and synchronous')
  t.same(await rt.run(ECHO, 'warm', { tenantId: 'victim' }), { kind: 'ok', value: { raw: 'warm' } })
  let spinning = true
  const hostile = rt.fail(code, { spin: true }, { tenantId: 'hostile' }).finally(() => (spinning = false))
  t.same(await rt.run(ECHO, 'served', { tenantId: 'victim' }), { kind: 'ok', value: { raw: 'served' } })
  t.ok(spinning, 'the victim, on the same worker thread, was answered while the hostile call still spun')
  t.equal((await hostile).code, 'reactor_timeout')
  t.equal(rt.sup.stats().syncOverruns, 1)
})

t.test('an await loop and a never-settling call of a warm isolate still end at the deadline', async (t) => {
  const rt = await startRuntime(t, { timeoutMs: 500 })
  const code = `module.exports = async (req) => {
    if (req.args.loop) for (;;) await null
    if (req.args.hang) await new Promise(() => {})
    return 'fine'
  }`
  for (const args of [{ loop: true }, { hang: true }]) {
    t.same(await rt.run(code, {}), { kind: 'ok', value: 'fine' })
    t.same(await rt.run(code, {}), { kind: 'ok', value: 'fine' }, 'warm and synchronous')
    t.equal((await rt.fail(code, args)).code, 'reactor_timeout', JSON.stringify(args))
    t.same(await rt.run(code, {}), { kind: 'ok', value: 'fine' })
  }
  t.equal(rt.sup.stats().syncOverruns, 1, 'the await loop overran the budget; the pending promise did not')
})
