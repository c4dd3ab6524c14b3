import t from 'tap'
import { SYNC_BUDGET_MS } from '../../src/reactors/runtime/child/invocation.js'
import { ECHO, startRuntime } from '../fixtures/reactors/harness.js'

// A warm isolate's calls run on the worker thread itself (child/invocation.ts, runSync) for at
// most SYNC_BUDGET_MS; a call past that starts again asynchronously, as if it had never run.
// The budget is wall time: on a loaded machine a quick run can be stopped too (and an isolate
// stopped twice runs asynchronously for good), so counts here are bounds.

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
  await call(3, 4 * SYNC_BUDGET_MS) // stopped at the budget, started again
  t.ok(rt.sup.stats().syncOverruns >= 1)
  await call(4, 4 * SYNC_BUDGET_MS) // asynchronous for good: call 3's run was busy (or call 4 stopped too)
  const stopped = rt.sup.stats().syncOverruns
  t.ok(stopped <= 2, `${stopped} runs stopped`)
  await call(5, 0)
  await call(6, 4 * SYNC_BUDGET_MS)
  t.same(rt.sup.stats(), { coldStarts: 1, warmStarts: 5, restarts: 0, syncOverruns: stopped }, 'one isolate served every call, none synchronously since')
  t.same(seen, [1, 2, 3, 4, 5, 6], 'each call reached the host once: a stopped run\'s bridge call was never posted')
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
  t.ok(rt.sup.stats().syncOverruns >= 1, 'the spinning run was stopped at the budget')
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
  t.ok(rt.sup.stats().syncOverruns >= 1, 'the await loop was stopped at the budget')
})

t.test('a memory bomb and deep recursion on a warm isolate fail as on a cold one; the next call succeeds', async (t) => {
  const rt = await startRuntime(t, { memoryMb: 16 })
  const code = `module.exports = async (req) => {
    if (req.args.bomb) { const a = []; for (;;) a.push(new Array(1000000).fill(1.5)) }
    if (req.args.recurse) { const f = (n) => f(n + 1) + 1; return f(0) }
    return 'fine'
  }`
  t.same(await rt.run(code, {}), { kind: 'ok', value: 'fine' })
  t.same(await rt.run(code, {}), { kind: 'ok', value: 'fine' }, 'warm and synchronous')
  const bomb = await rt.fail(code, { bomb: true })
  t.equal(bomb.code, 'reactor_error')
  t.match(bomb.detail, /memory limit of 16 MB/)
  t.same(await rt.run(code, {}), { kind: 'ok', value: 'fine' }, 'a new isolate')
  t.same(await rt.run(code, {}), { kind: 'ok', value: 'fine' }, 'warm and synchronous again')
  const deep = await rt.fail(code, { recurse: true })
  t.equal(deep.code, 'reactor_error')
  t.match(deep.detail, /Maximum call stack size exceeded/)
  t.same(await rt.run(code, {}), { kind: 'ok', value: 'fine' })
  t.equal(rt.sup.stats().restarts, 0)
})
