import t from 'tap'
import { AppError } from '../../../src/errors/index.js'
import { Admission, type AdmissionLimits, type Release, type Timers } from '../../../src/reactors/scheduling/admission.js'

/** Timers that fire only when the test says so. */
class ManualTimers implements Timers {
  private readonly pending = new Map<number, () => void>()
  private next = 0
  set(fn: () => void): unknown {
    this.pending.set(++this.next, fn)
    return this.next
  }
  clear(handle: unknown): void {
    this.pending.delete(handle as number)
  }
  fireAll(): void {
    for (const [id, fn] of [...this.pending]) {
      this.pending.delete(id)
      fn()
    }
  }
  get size(): number {
    return this.pending.size
  }
}

/** Limits without slow start (a slow tenant may run as many as a quick one) unless `perTenantSlow` is given. */
const limits = (over: Partial<AdmissionLimits['concurrency']> = {}, queue: Partial<AdmissionLimits['queue']> = {}): AdmissionLimits => {
  const concurrency = { total: 4, perTenant: 2, perReactor: 1, slowCallMs: 100, ...over }
  return { concurrency: { perTenantSlow: concurrency.perTenant, ...concurrency }, queue: { total: 8, perTenant: 4, ...queue } }
}

/** Settles on the next turn: whether `p` was admitted, shed, or still waits. */
async function state(p: Promise<Release>): Promise<'admitted' | 'shed' | 'waiting'> {
  return Promise.race([
    p.then(
      () => 'admitted' as const,
      () => 'shed' as const,
    ),
    new Promise<'waiting'>((resolve) => setImmediate(() => resolve('waiting'))),
  ])
}

t.test('calls under every cap start at once; the per-Reactor cap queues the next call of that Reactor', async (t) => {
  const a = new Admission(limits(), 1, new ManualTimers())
  const first = await a.admit({ tenantId: 'A', reactorId: 'r1' }, 1000)
  const second = a.admit({ tenantId: 'A', reactorId: 'r1' }, 1000)
  t.equal(await state(second), 'waiting', 'r1 is at its cap of 1')
  t.equal(await state(a.admit({ tenantId: 'A', reactorId: 'r2' }, 1000)), 'admitted', 'another Reactor of the same tenant is not held back')
  t.same(a.stats(), { running: 2, queued: 1, shed: 0 })
  first()
  first()
  t.equal(await state(second), 'admitted', 'a freed slot goes to the waiting call (a second release is a no-op)')
  t.same(a.stats(), { running: 2, queued: 0, shed: 0 })
})

t.test('a tenant at its cap waits while another tenant runs; freed slots go round-robin over tenants', async (t) => {
  const a = new Admission(limits({ total: 3, perTenant: 2, perReactor: 2 }), 1, new ManualTimers())
  const held = [await a.admit({ tenantId: 'A', reactorId: 'x' }, 1000), await a.admit({ tenantId: 'A', reactorId: 'x' }, 1000)]
  const aWaits = [a.admit({ tenantId: 'A', reactorId: 'x' }, 1000), a.admit({ tenantId: 'A', reactorId: 'x' }, 1000)]
  const b1 = await a.admit({ tenantId: 'B', reactorId: 'y' }, 1000)
  t.same(a.stats(), { running: 3, queued: 2, shed: 0 }, 'B ran beside A at its tenant cap')
  const bWait = a.admit({ tenantId: 'B', reactorId: 'y' }, 1000)
  held[0]!()
  t.equal(await state(aWaits[0]!), 'admitted', 'A queued first')
  t.equal(await state(bWait), 'waiting')
  b1()
  t.equal(await state(bWait), 'admitted', 'then B, although A also waits (and A is at its cap anyway)')
  t.equal(await state(aWaits[1]!), 'waiting')
})

t.test('a full queue sheds at once with 503 reactor_overloaded and Retry-After', async (t) => {
  const a = new Admission(limits({ total: 1 }, { total: 3, perTenant: 2 }), 2, new ManualTimers())
  await a.admit({ tenantId: 'A', reactorId: 'r' }, 1000)
  void a.admit({ tenantId: 'A', reactorId: 'r' }, 1000).catch(() => undefined)
  void a.admit({ tenantId: 'A', reactorId: 'r' }, 1000).catch(() => undefined)
  const err = await a.admit({ tenantId: 'A', reactorId: 'r' }, 1000).catch((e: unknown) => e)
  t.ok(err instanceof AppError)
  t.match(err, { code: 'reactor_overloaded', status: 503, headers: { 'Retry-After': '2' } }, 'the tenant queue is full')
  void a.admit({ tenantId: 'B', reactorId: 's' }, 1000).catch(() => undefined)
  t.match(await a.admit({ tenantId: 'C', reactorId: 'u' }, 1000).catch((e: unknown) => e), { code: 'reactor_overloaded' }, 'the total queue is full')
  t.match(await a.admit({ tenantId: 'D', reactorId: 'v' }, 0).catch((e: unknown) => e), { code: 'reactor_overloaded' }, 'no time to wait: shed')
  t.same(a.stats(), { running: 1, queued: 3, shed: 3 })
})

t.test('a call that waited its longest is shed and leaves the queue', async (t) => {
  const timers = new ManualTimers()
  const a = new Admission(limits({ total: 1 }), 1, timers)
  const release = await a.admit({ tenantId: 'A', reactorId: 'r' }, 1000)
  const waiting = a.admit({ tenantId: 'B', reactorId: 's' }, 50)
  t.equal(timers.size, 1)
  timers.fireAll()
  t.match(await waiting.catch((e: unknown) => e), { code: 'reactor_overloaded', headers: { 'Retry-After': '1' } })
  t.same(a.stats(), { running: 1, queued: 0, shed: 1 })
  release()
  t.same(a.stats(), { running: 0, queued: 0, shed: 1 }, 'nothing left to admit')
  t.equal(await state(a.admit({ tenantId: 'B', reactorId: 's' }, 50)), 'admitted')
})

t.test('an admitted call clears its wait timer', async (t) => {
  const timers = new ManualTimers()
  const a = new Admission(limits({ total: 1 }), 1, timers)
  const release = await a.admit({ tenantId: 'A', reactorId: 'r' }, 1000)
  const waiting = a.admit({ tenantId: 'A', reactorId: 'q' }, 1000)
  release()
  t.equal(await state(waiting), 'admitted')
  t.equal(timers.size, 0)
})

t.test('slow start: a Reactor that has not run yet starts within the tenant\'s slow budget; once quick, up to the tenant cap', async (t) => {
  let now = 0
  const a = new Admission(limits({ total: 8, perTenant: 3, perReactor: 3, perTenantSlow: 1, slowCallMs: 100 }), 1, new ManualTimers(), () => now)
  const first = await a.admit({ tenantId: 'A', reactorId: 'r' }, 1000)
  const waiting = [a.admit({ tenantId: 'A', reactorId: 'r' }, 1000), a.admit({ tenantId: 'A', reactorId: 'r' }, 1000)]
  t.equal(await state(waiting[0]!), 'waiting', 'r has not run yet: one slow call at a time')
  const other = a.admit({ tenantId: 'A', reactorId: 's' }, 1000)
  t.equal(await state(other), 'waiting', 'another new Reactor of A shares the slow budget')
  t.equal(await state(a.admit({ tenantId: 'B', reactorId: 'u' }, 1000)), 'admitted', 'another tenant is not held back')
  now = 50
  first()
  t.equal(await state(waiting[0]!), 'admitted', 'r\'s call ended within 100 ms: r is quick')
  t.equal(await state(waiting[1]!), 'admitted', 'and runs beside it, up to the tenant cap of 3')
  t.equal(await state(other), 'admitted', 's (not quick yet) takes the slow budget the first call freed')
  t.same(a.stats(), { running: 4, queued: 0, shed: 0 })
})

t.test('a spinning Reactor holds only the slow budget; quick Reactors of its tenant keep running', async (t) => {
  let now = 0
  const a = new Admission(limits({ total: 8, perTenant: 3, perReactor: 3, perTenantSlow: 1, slowCallMs: 100 }), 1, new ManualTimers(), () => now)
  ;(await a.admit({ tenantId: 'A', reactorId: 'quick' }, 1000))()
  const spinning = await a.admit({ tenantId: 'A', reactorId: 'spin' }, 1000)
  const spinAgain = a.admit({ tenantId: 'A', reactorId: 'spin' }, 1000)
  t.equal(await state(spinAgain), 'waiting', 'spin has no quick call: it waits for the slow budget')
  const quick = a.admit({ tenantId: 'A', reactorId: 'quick' }, 1000)
  t.equal(await state(quick), 'admitted', 'quick is not held by spin')
  now = 10
  ;(await quick)()
  now = 5000
  spinning()
  t.equal(await state(spinAgain), 'admitted', 'the slow call ended: its slot goes to the waiting one')
  t.equal(await state(a.admit({ tenantId: 'A', reactorId: 'spin' }, 1000)), 'waiting', 'spin took 5 s: still one at a time')
})

t.test('a quick Reactor\'s call that runs past slowCallMs counts against the slow budget', async (t) => {
  let now = 0
  const a = new Admission(limits({ total: 8, perTenant: 3, perReactor: 3, perTenantSlow: 1, slowCallMs: 100 }), 1, new ManualTimers(), () => now)
  ;(await a.admit({ tenantId: 'A', reactorId: 'r' }, 1000))()
  const long = await a.admit({ tenantId: 'A', reactorId: 'r' }, 1000)
  t.equal(await state(a.admit({ tenantId: 'A', reactorId: 'new' }, 1000)), 'admitted', 'r\'s running call is young: the slow budget is free')
  now = 200
  const held = a.admit({ tenantId: 'A', reactorId: 'other' }, 1000)
  t.equal(await state(held), 'waiting', 'r\'s call has run 200 ms and \'new\' is running: the budget of 1 is spent')
  long()
  t.same(a.stats(), { running: 1, queued: 1, shed: 0 }, 'the young call of \'new\' still holds the budget')
})
