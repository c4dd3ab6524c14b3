import t from 'tap'
import { startTestApp, type TestApp } from '../helpers/app.js'
import { appKey } from '../helpers/tokens.js'

// Issue 13, items 3 and 4, over HTTP: one tenant's hostile Reactor cannot time out another
// tenant's calls, and the react route answers 200 or 503 (never 504, never silence) at any
// offered load of a well-behaved Reactor.

const OPERATOR = 'operator-key-0123456789abcdef0123456789'
const ECHO = 'module.exports = async (req) => ({ raw: req.args })'
const privateRules = { type: 'private', rules: [{ priority: 1, container: '/', transform: 'mask', permissions: ['token:use'] }] }

/** A management key and a private key of a new tenant. */
async function tenant(app: TestApp, name: string): Promise<{ admin: string; caller: string }> {
  const created = await app.request('POST', '/tenants', { key: OPERATOR, body: { name } })
  if (created.status !== 201) throw new Error(`tenant ${name}: ${created.status} ${created.text}`)
  const admin = created.body.application.key as string
  const res = await app.request('POST', '/applications', { key: admin, body: { name: `${name} caller`, ...privateRules } })
  return { admin, caller: res.body.key as string }
}

async function reactor(app: TestApp, admin: string, code: string): Promise<string> {
  const res = await app.request('POST', '/reactors', { key: admin, body: { name: 'r', code } })
  if (res.status !== 201) throw new Error(`reactor: ${res.status} ${res.text}`)
  return res.body.id as string
}

t.test('a hostile tenant at its cap leaves another tenant\'s warm invoke succeeding, with no 504', async (t) => {
  const app = await startTestApp(t, {
    SVC_OPERATOR_KEY: OPERATOR,
    SVC_REACTOR_TIMEOUT_MS: '3000',
    SVC_REACTOR_CONCURRENCY_PER_TENANT: '3',
    SVC_REACTOR_CONCURRENCY_PER_TENANT_SLOW: '1',
    SVC_REACTOR_CONCURRENCY_PER_REACTOR: '3',
    SVC_REACTOR_QUEUE_PER_TENANT: '3',
    SVC_REACTOR_QUEUE_TIMEOUT_MS: '200',
    // The echoes' first (cold) calls must count as quick even on a loaded CI machine (the default
    // 250 ms was exceeded there); the spinning calls end at the 3 s time-out, slow all the same.
    SVC_REACTOR_SLOW_CALL_MS: '2000',
  })
  const a = await tenant(app, 'hostile')
  const b = await tenant(app, 'victim')
  const spin = await reactor(app, a.admin, 'module.exports = async () => { while (true) {} }')
  const echo = await reactor(app, b.admin, ECHO)
  const ownEcho = await reactor(app, a.admin, ECHO)
  t.equal((await app.request('POST', `/reactors/${echo}/react`, { key: b.caller, body: { args: 'warm' } })).status, 200)
  t.equal((await app.request('POST', `/reactors/${ownEcho}/react`, { key: a.caller, body: { args: 'warm' } })).status, 200)
  const hostile = Array.from({ length: 12 }, () => app.request('POST', `/reactors/${spin}/react`, { key: a.caller, body: { args: {} } }))
  await held(app, 1)
  await new Promise((r) => setTimeout(r, 300))
  t.equal(app.services.supervisor.load().running, 1, 'the spinning Reactor has no quick call: one at a time (slow start), not A\'s cap of 3')
  const own = await app.request('POST', `/reactors/${ownEcho}/react`, { key: a.caller, body: { args: 'mine' } })
  t.equal(own.status, 200, 'A\'s quick Reactor is not held by its spinning one')
  const victim = await app.request('POST', `/reactors/${echo}/react`, { key: b.caller, body: { args: 'fine' } })
  t.equal(victim.status, 200, 'B succeeds while A spins')
  t.same(victim.body.raw, 'fine')
  const statuses = (await Promise.all(hostile)).map((r) => r.status)
  t.same(statuses.filter((s) => s !== 504 && s !== 503), [], 'A gets its own 504s and 503s')
  const shed = (await Promise.all(hostile)).find((r) => r.status === 503)
  t.equal(shed?.headers.get('retry-after'), '1')
  t.equal(shed?.headers.get('content-type'), 'application/problem+json')
  t.match(shed?.body, { type: '/problems/reactor-overloaded', status: 503, title: 'The Reactor runtime is at capacity.' })
})

t.test('at any offered load the react route answers 200 or 503 with Retry-After, never 504', async (t) => {
  const app = await startTestApp(t, {
    SVC_REACTOR_TIMEOUT_MS: '5000',
    SVC_REACTOR_CONCURRENCY_TOTAL: '4',
    SVC_REACTOR_CONCURRENCY_PER_TENANT: '4',
    SVC_REACTOR_CONCURRENCY_PER_REACTOR: '4',
    // Not the slow start (the test above): 4 calls of 1.5 s run at once, and the rest must be shed.
    SVC_REACTOR_CONCURRENCY_PER_TENANT_SLOW: '4',
    SVC_REACTOR_QUEUE_TOTAL: '8',
    SVC_REACTOR_QUEUE_PER_TENANT: '8',
    SVC_REACTOR_QUEUE_TIMEOUT_MS: '300',
  })
  const caller = await appKey(app, privateRules)
  // Busy for 1.5 s of wall time: each call holds its slot that long, whatever the CPU load, so
  // all 40 calls arrive while the first 4 still run even on a loaded machine (200 ms was not).
  const slow = await reactor(app, app.adminKey, 'module.exports = async (req) => { const end = Date.now() + 1500; while (Date.now() < end) {} return { raw: req.args } }')
  const answers = await Promise.all(Array.from({ length: 40 }, (_, i) => app.request('POST', `/reactors/${slow}/react`, { key: caller, body: { args: i } })))
  const statuses = answers.map((r) => r.status)
  t.same(statuses.filter((s) => s !== 200 && s !== 503), [], 'only successes and sheds')
  t.ok(statuses.filter((s) => s === 200).length >= 4, 'the calls that got a slot succeeded')
  t.ok(statuses.filter((s) => s === 503).length >= 28, 'what exceeds 4 running and 8 queued is shed at once')
  for (const r of answers.filter((r) => r.status === 503)) t.equal(r.headers.get('retry-after'), '1')
})

/** Resolves once `n` Reactor calls are running in the app's runtime. */
async function held(app: TestApp, n: number): Promise<void> {
  while (app.services.supervisor.load().running < n) await new Promise((r) => setImmediate(r))
}
