import net from 'node:net'
import { pino } from 'pino'
import t from 'tap'
import { AppError } from '../../../src/errors/index.js'
import { BridgeBudget } from '../../../src/reactors/runtime/host/bridge-budget.js'
import { dispatchBridge, type BridgeFetchOptions, type HostBridges } from '../../../src/reactors/runtime/host/bridge-dispatch.js'
import { RuntimeConnection } from '../../../src/reactors/runtime/host/connection.js'
import { encodeFrame, FrameReader } from '../../../src/reactors/runtime/shared/frames.js'
import type { LaneReply, LaneRequest } from '../../../src/reactors/runtime/shared/protocol.js'
import { WarmPool } from '../../../src/reactors/scheduling/warm-pool.js'
import { until } from '../../helpers/wait.js'

const unused = (): Promise<never> => Promise.reject(new Error('not used in this test'))

t.test('BridgeBudget: places, the answer budget and the end', async (t) => {
  const budget = new BridgeBudget({ concurrency: 2, answerMaxBytes: 250 }, 100)
  t.equal(budget.admit(), undefined)
  t.equal(budget.admit(), undefined)
  t.equal(budget.admit(), 'A Reactor may have at most 2 service calls in flight at once.')
  budget.release()
  t.equal(budget.admit(), undefined, 'a released place is taken again')
  t.same(budget.answerLimit('fetch'), { bytes: 100, detail: 'The answer of fetch is larger than the 100-byte Reactor payload limit.', budget: false })
  budget.charge(180)
  const spent = 'The service calls of one Reactor invocation may receive at most 250 bytes of answers in all.'
  t.same(budget.answerLimit('detokenize'), { bytes: 70, detail: spent, budget: true }, 'less is left than the payload limit')
  t.same(budget.answerLimit('tokenize').bytes, 100, 'a tokenize answer (its tokens are stored by then) is held to the payload limit only')
  budget.charge(70)
  budget.release()
  t.equal(budget.admit(), spent, 'nothing left: refused before it runs')
  t.notOk(budget.signal.aborted)
  budget.end()
  t.ok(budget.signal.aborted && budget.ended)
  t.equal(budget.admit(), 'The invocation has ended.')
})

t.test('dispatchBridge charges answers and refuses one past what is left, with the reason', async (t) => {
  const spent = 'The service calls of one Reactor invocation may receive at most 27 bytes of answers in all.'
  const budget = new BridgeBudget({ concurrency: 8, answerMaxBytes: 27 }, 1000)
  const bridges: HostBridges = { tokenize: unused, detokenize: async (_ctx, value) => value, fetch: unused }
  t.equal(await dispatchBridge(bridges, 'detokenize', {}, '"aaaaaaaaaa"', budget), '"aaaaaaaaaa"')
  t.equal(await dispatchBridge(bridges, 'detokenize', {}, '"ééééé"', budget), '"ééééé"', '12 bytes, charged as UTF-8')
  t.equal(await dispatchBridge(bridges, 'detokenize', {}, '"a"', budget), '"a"', 'an answer that fits, to the byte')
  const err = await dispatchBridge(bridges, 'detokenize', {}, '"abcd"', budget).catch((e: unknown) => e)
  t.ok(err instanceof AppError && err.code === 'payload_too_large')
  t.equal((err as AppError).detail, spent)
  t.equal(budget.admit(), spent, 'spent: the next call is refused before it runs')

  const refused = new BridgeBudget({ concurrency: 8, answerMaxBytes: 30 }, 10)
  for (let i = 0; i < 3; i++) t.ok(await dispatchBridge(bridges, 'detokenize', {}, JSON.stringify('x'.repeat(20)), refused).catch((e: unknown) => e) instanceof AppError)
  t.match(refused.admit(), /at most 30 bytes/, 'answers refused for their size were read and encoded: they use the budget up too')

  const written = new BridgeBudget({ concurrency: 8, answerMaxBytes: 27 }, 1000)
  written.charge(25)
  const stored = { tokenize: async (_ctx: unknown, value: unknown) => value, detokenize: unused, fetch: unused }
  t.equal(await dispatchBridge(stored, 'tokenize', {}, '"an-id-the-code-must-get"', written), '"an-id-the-code-must-get"', 'a tokenize answer is not refused by the budget: its tokens are stored')
  t.equal(written.admit(), spent, 'but it is charged, and the next call is refused before it runs')
})

t.test('dispatchBridge hands fetch the invocation signal, and the budget once it binds', async (t) => {
  const answer = JSON.stringify({ status: 200, headers: {}, body: 'x'.repeat(40) })
  const budget = new BridgeBudget({ concurrency: 8, answerMaxBytes: 160 }, 100)
  const seen: BridgeFetchOptions[] = []
  const bridges: HostBridges = {
    tokenize: unused,
    detokenize: unused,
    fetch: async (_ctx, _req, options = {}) => {
      seen.push(options)
      return { status: 200, headers: {}, body: 'x'.repeat(40) }
    },
  }
  const arg = JSON.stringify({ url: 'https://example.com/', method: 'GET', headers: {} })
  await dispatchBridge(bridges, 'fetch', {}, arg, budget)
  await dispatchBridge(bridges, 'fetch', {}, arg, budget)
  t.equal(seen[0]?.signal, budget.signal)
  t.equal(seen[0]?.budget, undefined, 'the payload limit binds first')
  t.match(seen[1]?.budget, { bytes: 160 - answer.length, detail: /at most 160 bytes of answers/ }, 'then what is left of the budget')
})

/**
 * A runtime child that ignores its own queue (a compromised one): it fires `calls` bridge calls
 * of one invocation at once over a real socket. The API process must serve only the bound, refuse
 * the rest, and abort the ones running when the invocation ends.
 */
t.test('the API process enforces the bound on a child that does not keep it', async (t) => {
  const server = net.createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise((resolve) => server.close(resolve)))
  const accepted = new Promise<net.Socket>((resolve) => server.once('connection', resolve))
  const child = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1')
  const lane = await accepted
  t.teardown(() => {
    child.destroy()
    lane.destroy()
  })

  let running = 0
  let peak = 0
  const signals: AbortSignal[] = []
  const bridges: HostBridges = {
    tokenize: unused,
    detokenize: unused,
    fetch: (_ctx, _req, options = {}) => {
      running++
      peak = Math.max(peak, running)
      signals.push(options.signal!)
      // Held until the invocation ends and aborts it.
      return new Promise((_resolve, reject) => options.signal!.addEventListener('abort', () => reject(new AppError('reactor_error', { detail: 'aborted' }))))
    },
  }
  const stuck: string[] = []
  const connection = new RuntimeConnection({
    lanes: [lane],
    pool: new WarmPool({ hotConcurrency: 1, perReactor: 1, total: 1, idleMs: 60_000 }, 1, Date.now),
    bridges,
    logger: pino({ level: 'silent' }),
    maxFrameBytes: 1 << 20,
    payloadMaxBytes: 1 << 16,
    bridgeLimits: { concurrency: 3, answerMaxBytes: 1 << 20 },
    onReady: () => undefined,
    onStuck: (reason) => void stuck.push(reason),
  })

  const answers: Array<Extract<LaneRequest, { t: 'bridge-result' }> & { body: string }> = []
  let invocation: number | undefined
  const reader = new FrameReader((header, body) => {
    const frame = header as LaneRequest
    if (frame.t === 'invoke') invocation = frame.id
    if (frame.t === 'bridge-result') answers.push({ ...frame, body })
  }, 1 << 20)
  child.on('data', (chunk: Buffer) => reader.push(chunk))
  const send = (reply: LaneReply, body?: string): void => void child.write(encodeFrame(reply, body))

  send({ t: 'ready' })
  const run = connection.run({ reactorId: 'r', version: '1', code: '', context: {} }, '{}', 10_000)
  await until(() => invocation !== undefined, 'the invoke frame')
  const arg = JSON.stringify({ url: 'https://example.com/', method: 'GET', headers: {} })
  for (let callId = 1; callId <= 10; callId++) send({ t: 'bridge', id: invocation!, callId, op: 'fetch' }, arg)
  await until(() => answers.length === 7, 'the calls past the bound to be refused')
  t.equal(running, 3)
  t.equal(peak, 3, 'never more than the bound served at once')
  t.same(answers.map((a) => [a.callId, a.ok, a.body]), [4, 5, 6, 7, 8, 9, 10].map((callId) => [callId, false, 'A Reactor may have at most 3 service calls in flight at once.']))

  send({ t: 'done', id: invocation!, kept: true, outcome: { kind: 'ok' } }, '"fine"')
  t.match(await run, { outcome: { kind: 'ok', json: '"fine"' } })
  t.ok(signals.every((s) => s.aborted), 'the calls still running are aborted when the invocation ends')
  send({ t: 'bridge', id: invocation!, callId: 11, op: 'fetch' }, arg)
  await until(() => answers.length === 8, 'a call after the end to be refused')
  t.same([answers[7]?.callId, answers[7]?.ok, answers[7]?.body], [11, false, 'The invocation has ended.'])
  t.equal(signals.length, 3, 'nothing was dispatched after the end')
  t.same(stuck, [])
  connection.fail(() => new AppError('unavailable'))
})
