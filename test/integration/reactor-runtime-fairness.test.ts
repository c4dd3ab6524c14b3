import t from 'tap'
import { testConfig } from '../../src/config/index.js'
import { AppError } from '../../src/errors/index.js'
import type { ReactorOutcome } from '../../src/reactors/supervisor.js'
import { ECHO, fixture, Hold, startRuntime } from '../fixtures/reactors/harness.js'

// Fairness (issue 13, items 3 and 4): concurrency caps per Reactor and per tenant, a bounded
// queue that sheds with 503 + Retry-After, and no call of one tenant held by another's.

const defaults = testConfig().reactors
/** Caps without slow start unless `perTenantSlow` is given. */
const caps = (concurrency: Partial<typeof defaults.concurrency>, queue: Partial<typeof defaults.queue> = {}) => ({
  concurrency: { ...defaults.concurrency, perTenantSlow: concurrency.perTenant ?? defaults.concurrency.perTenant, ...concurrency },
  queue: { ...defaults.queue, ...queue },
})

const settle = (p: Promise<ReactorOutcome>) => p.then((value) => ({ ok: value }), (err: unknown) => ({ err: err as AppError }))

t.test('the per-tenant cap queues a tenant\'s extra calls while another tenant runs; a full queue sheds with 503', async (t) => {
  const hold = new Hold()
  const rt = await startRuntime(t, { timeoutMs: 10_000, ...caps({ total: 8, perTenant: 2, perReactor: 2 }, { perTenant: 1, timeoutMs: 5000 }) }, { tokenize: hold.pass })
  const barrier = fixture('barrier.js')
  const running = [1, 2].map((n) => settle(rt.run(barrier, { n }, { tenantId: 'A', reactorId: 'a1' })))
  await hold.held(2)
  const queued = settle(rt.run(ECHO, 'queued', { tenantId: 'A', reactorId: 'a2' }))
  const shed = await settle(rt.run(ECHO, 'shed', { tenantId: 'A', reactorId: 'a3' }))
  t.match(shed, { err: { code: 'reactor_overloaded', status: 503, headers: { 'Retry-After': '5' } } }, 'A\'s queue of 1 is full')
  t.match(rt.sup.load(), { running: 2, queued: 1, shed: 1 })
  t.same(await rt.run(ECHO, 'b', { tenantId: 'B', reactorId: 'b1' }), { kind: 'ok', value: { raw: 'b' } }, 'B is not held by A')
  hold.open()
  t.same(await Promise.all(running), [{ ok: { kind: 'ok', value: { raw: 1 } } }, { ok: { kind: 'ok', value: { raw: 2 } } }])
  t.same(await queued, { ok: { kind: 'ok', value: { raw: 'queued' } } }, 'the queued call ran once a slot freed')
})

t.test('the per-Reactor cap holds only that Reactor; a call that waits too long is shed, never left to time out', async (t) => {
  const hold = new Hold()
  const rt = await startRuntime(t, { timeoutMs: 10_000, ...caps({ total: 8, perTenant: 8, perReactor: 1 }, { timeoutMs: 100 }) }, { tokenize: hold.pass })
  const barrier = fixture('barrier.js')
  const running = settle(rt.run(barrier, { n: 1 }, { reactorId: 'capped' }))
  await hold.held(1)
  t.same(await rt.run(ECHO, 'other'), { kind: 'ok', value: { raw: 'other' } }, 'another Reactor of the same tenant runs')
  const waited = await settle(rt.run(barrier, { n: 2 }, { reactorId: 'capped' }))
  t.match(waited, { err: { code: 'reactor_overloaded', status: 503, headers: { 'Retry-After': '1' } } }, 'shed after the queue time-out')
  hold.open()
  t.same(await running, { ok: { kind: 'ok', value: { raw: 1 } } })
})

t.test('a hostile tenant saturating its cap leaves another tenant\'s warm invoke succeeding, with no 504', async (t) => {
  const rt = await startRuntime(t, { timeoutMs: 3000, ...caps({ total: 8, perTenant: 3, perReactor: 3 }, { perTenant: 3, timeoutMs: 200 }) })
  t.same(await rt.run(ECHO, 'warm', { tenantId: 'B', reactorId: 'b' }), { kind: 'ok', value: { raw: 'warm' } })
  const hostile = Array.from({ length: 12 }, () => settle(rt.run(fixture('infinite-loop.js'), {}, { tenantId: 'A', reactorId: 'spin' })))
  // Every call of A is running, queued or shed by now: admission is synchronous.
  t.match(rt.sup.load(), { running: 3, queued: 3, shed: 6 })
  const b = await settle(rt.run(ECHO, 'still fine', { tenantId: 'B', reactorId: 'b' }))
  t.same(b, { ok: { kind: 'ok', value: { raw: 'still fine' } } }, 'B succeeds while A spins')
  t.equal(rt.sup.stats().warmStarts, 1, 'on its warm isolate')
  const codes = (await Promise.all(hostile)).map((r) => ('err' in r ? r.err.code : 'ok'))
  t.same(codes.filter((c) => c !== 'reactor_timeout' && c !== 'reactor_overloaded'), [], 'A\'s own calls time out or are shed')
  t.equal(codes.filter((c) => c === 'reactor_timeout').length, 3, 'only the calls that ran hit their deadline; the queued ones were shed')
})
