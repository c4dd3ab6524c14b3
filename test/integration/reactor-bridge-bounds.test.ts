import type http from 'node:http'
import t from 'tap'
import { startTestApp, type TestApp } from '../helpers/app.js'
import { startStub } from '../helpers/stub-server.js'
import { appKey } from '../helpers/tokens.js'
import { until } from '../helpers/wait.js'

// One invocation's bridge calls are bounded in the API process: how many run at once
// (SVC_REACTOR_BRIDGE_CONCURRENCY; the rest wait in order), how many bytes of answers it gets in
// all (SVC_REACTOR_BRIDGE_ANSWER_MAX_BYTES), and none outlives the invocation.

/** Starts Promise.all of `n` fetches of `<URL>/<i>`; each settles to the body or the error message. */
const FAN_OUT = `module.exports = async (req) => {
  const calls = Array.from({ length: req.args.n }, (_, i) => fetch(req.configuration.URL + '/' + i).then((r) => r.body, (e) => 'error: ' + e.message))
  return { raw: await Promise.all(calls) }
}`

/** Fetches one after another and notes what each got. */
const IN_TURN = `module.exports = async (req) => {
  const out = []
  for (let i = 0; i < req.args.n; i++) {
    try { out.push({ ok: (await fetch(req.configuration.URL + '/' + i)).body.length }) } catch (e) { out.push({ error: e.message }) }
  }
  return { raw: out }
}`

async function reactor(app: TestApp, code: string, url: string): Promise<{ react(args: unknown): Promise<{ status: number; body: any }> }> { // eslint-disable-line @typescript-eslint/no-explicit-any
  const caller = await appKey(app, { type: 'private', permissions: ['token:use'] })
  const created = await app.request('POST', '/reactors', { body: { name: 'fan-out', code, configuration: { URL: url } } })
  if (created.status !== 201) throw new Error(`creating the Reactor failed: ${created.status} ${created.text}`)
  return { react: (args) => app.request('POST', `/reactors/${created.body.id}/react`, { key: caller, body: { args } }) }
}

t.test('parallel fetches: never more than the bound at the destination, every answer arrives, in order', async (t) => {
  const bound = 4
  const n = 40
  // One worker thread: the marker call below travels the fan-out's lane, behind its calls; both
  // Reactors are new (slow until they ran quick), and both run at once.
  const app = await startTestApp(t, { SVC_REACTOR_BRIDGE_CONCURRENCY: String(bound), SVC_REACTOR_WORKERS: '1', SVC_REACTOR_CONCURRENCY_PER_TENANT_SLOW: '4', SVC_REACTOR_TIMEOUT_MS: '20000' })
  const held: Array<{ index: number; res: http.ServerResponse }> = []
  const arrivals: Array<{ index: number; answeredBefore: number }> = []
  let answered = 0
  let peak = 0
  let flowing = false
  const answerOldest = (): void => {
    const next = held.shift()!
    answered++
    next.res.end(String(next.index))
  }
  // Once flowing, the stub answers the oldest request whenever `bound` wait (all of them once
  // the last has come), so the fan-out goes on only as fast as the bound lets it.
  const flow = (): void => {
    if (!flowing) return
    if (arrivals.length === n) while (held.length > 0) answerOldest()
    else if (held.length >= bound) answerOldest()
  }
  const stub = await startStub(t, (req, res) => {
    if (req.url === '/marker') return res.end('marker')
    const index = Number(req.url?.slice(1))
    arrivals.push({ index, answeredBefore: answered })
    held.push({ index, res })
    peak = Math.max(peak, held.length)
    flow()
  })
  const fanOut = await reactor(app, FAN_OUT, stub.origin)
  const marker = await reactor(app, 'module.exports = async (req) => ({ raw: (await fetch(req.configuration.URL)).body })', `${stub.origin}/marker`)
  const running = fanOut.react({ n })
  // Nothing answered yet: `bound` requests arrive and the rest must wait. Another invocation's
  // fetch, sent after the fan-out's calls were made, reaches the destination after anything the
  // API process would have sent of them without the bound.
  await until(() => held.length >= bound, `${bound} requests at the destination`)
  t.same((await marker.react({})).body, { raw: 'marker' })
  t.equal(arrivals.length, bound, `only ${bound} of the ${n} calls went out while none was answered`)
  flowing = true
  flow()
  const res = await running
  t.equal(res.status, 200)
  t.same(res.body.raw, Array.from({ length: n }, (_, i) => String(i)), 'every fetch got its own answer')
  t.equal(arrivals.length, n)
  t.equal(peak, bound, `at most ${bound} requests at the destination at once`)
  // The queue is FIFO: call i is sent only once i - bound + 1 calls before it were answered.
  const outOfTurn = arrivals.filter(({ index, answeredBefore }) => index - bound + 1 > answeredBefore)
  t.same(outOfTurn, [], 'calls leave the queue in the order they were made')
})

t.test('the answer budget: past it a bridge call fails with the reason; the next invocation starts afresh', async (t) => {
  const budget = 5000
  const app = await startTestApp(t, { SVC_REACTOR_BRIDGE_ANSWER_MAX_BYTES: String(budget) })
  const stub = await startStub(t, (_req, res) => res.end('x'.repeat(1000)))
  const { react } = await reactor(app, IN_TURN, stub.origin)
  const reason = `The service calls of one Reactor invocation may receive at most ${budget} bytes of answers in all.`
  for (const round of [1, 2]) {
    const res = await react({ n: 8 })
    t.equal(res.status, 200)
    const results = res.body.raw as Array<{ ok?: number; error?: string }>
    const firstRefused = results.findIndex((r) => r.error !== undefined)
    t.ok(firstRefused >= 3, `round ${round}: the answers that fit arrive (${firstRefused} of 1,000 bytes and headers)`)
    t.ok(results.slice(0, firstRefused).every((r) => r.ok === 1000))
    t.same(results.slice(firstRefused), Array.from({ length: 8 - firstRefused }, () => ({ error: reason })), `round ${round}: every call past the budget fails with the reason`)
  }
})

t.test('after an invocation times out, its fetches are aborted and no more reach the destination', async (t) => {
  const bound = 3
  const app = await startTestApp(t, { SVC_REACTOR_BRIDGE_CONCURRENCY: String(bound), SVC_REACTOR_TIMEOUT_MS: '1500' })
  let closedUnanswered = 0
  const stub = await startStub(t, (req, res) => {
    if (req.url === '/after') return res.end('after')
    // Never answered: held until the caller goes away.
    res.on('close', () => closedUnanswered++)
  })
  const hang = await reactor(app, FAN_OUT, `${stub.origin}/held`)
  const res = await hang.react({ n: 30 })
  t.equal(res.status, 504)
  t.equal(res.body.type, '/problems/reactor-timeout')
  await until(() => closedUnanswered === bound, 'the fetches in flight at the deadline to be aborted')
  t.equal(stub.seen.length, bound, 'only the calls in flight reached the destination')
  // A later invocation's fetch goes through the same runtime and lane: anything of the ended one
  // still on its way would have reached the destination before it.
  const after = await reactor(app, 'module.exports = async (req) => ({ raw: (await fetch(req.configuration.URL)).body })', `${stub.origin}/after`)
  t.same((await after.react({})).body, { raw: 'after' })
  t.equal(stub.seen.filter((s) => s.url.startsWith('/held/')).length, bound, 'no queued call of the ended invocation was sent')
  t.equal(stub.seen.length, bound + 1)
})
