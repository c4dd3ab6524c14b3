import { randomUUID } from 'node:crypto'
import t from 'tap'
import type { AuditEvent } from '../../../src/audit/events.js'
import { AuditEventError } from '../../../src/audit/validate-event.js'
import { createAuditWriter, type AuditWriterOptions } from '../../../src/audit/writer.js'
import { AppError } from '../../../src/errors/index.js'
import type { UnsealedAuditRow } from '../../../src/store/index.js'

const tenant = randomUUID()
const event = (): AuditEvent => ({ tenantId: tenant, actor: { kind: 'application', id: randomUUID() }, action: 'token.read', outcome: 'success', status: 200, traceId: null, clientIp: null })
const events = (n: number) => Array.from({ length: n }, event)

/** A database stand-in whose transactions finish when the test says so. */
function manualSink() {
  const calls: { rows: UnsealedAuditRow[]; done: () => void; fail: (err: Error) => void }[] = []
  let waiting: (() => void) | undefined
  return {
    calls,
    write: (rows: UnsealedAuditRow[]) =>
      new Promise<void>((resolve, reject) => {
        calls.push({ rows, done: resolve, fail: reject })
        waiting?.()
      }),
    /** Resolves once `n` transactions have started. */
    started: (n: number) => new Promise<void>((resolve) => {
      const check = () => (calls.length >= n ? resolve() : (waiting = check))
      check()
    }),
  }
}

const logs: string[] = []
const logger = { error: (_o: unknown, msg?: string) => void logs.push(msg ?? ''), warn: () => undefined }
const writer = (write: AuditWriterOptions['write'], options: Partial<AuditWriterOptions> = {}) =>
  createAuditWriter({ write, logger, queueMaxEvents: 100, batchMaxEvents: 10, timeoutMs: 5000, retryDelayMs: 0, ...options })

const settled = (p: Promise<unknown>) => p.then(() => 'resolved', (e: unknown) => e)

t.test('record resolves only once its transaction committed', async (t) => {
  const sink = manualSink()
  const w = writer(sink.write)
  let done = false
  const p = w.record(events(2)).then(() => (done = true))
  await sink.started(1)
  await new Promise((r) => setImmediate(r))
  t.equal(done, false, 'not before the commit')
  sink.calls[0]!.done()
  await p
  t.equal(done, true)
  t.match(w.stats(), { written: 2, batches: 1, queued: 0, failing: false })
})

t.test('group commit: what arrives during a transaction goes in the next one, together', async (t) => {
  const sink = manualSink()
  const w = writer(sink.write)
  const first = w.record(events(1))
  await sink.started(1)
  const waiting = [w.record(events(3)), w.record(events(2)), w.record(events(4))]
  w.note(events(1))
  sink.calls[0]!.done()
  await first
  await sink.started(2)
  t.equal(sink.calls[1]!.rows.length, 10, 'nine recorded and one noted event share one transaction')
  sink.calls[1]!.done()
  await Promise.all(waiting)
  t.equal(sink.calls.length, 2)
})

t.test('a batch holds at most batchMaxEvents, but never splits one request', async (t) => {
  const sink = manualSink()
  const w = writer(sink.write, { batchMaxEvents: 5 })
  const blocker = w.record(events(1))
  await sink.started(1)
  const rest = [w.record(events(3)), w.record(events(3)), w.record(events(7))]
  sink.calls[0]!.done()
  for (let i = 1; i <= 3; i++) {
    await sink.started(i + 1)
    sink.calls[i]!.done()
  }
  await Promise.all([blocker, ...rest])
  t.same(sink.calls.map((c) => c.rows.length), [1, 3, 3, 7])
  t.same(new Set(sink.calls[3]!.rows.map((r) => r.occurred_at.getTime())).size, 1, 'one request, one time')
})

t.test('a failed write: record rejects with 503 unavailable; note retries, then drops', async (t) => {
  const sink = manualSink()
  const w = writer(sink.write)
  const blocker = w.record(events(1))
  await sink.started(1)
  const recorded = settled(w.record(events(1)))
  w.note(events(1))
  sink.calls[0]!.done()
  await blocker
  await sink.started(2)
  t.equal(sink.calls[1]!.rows.length, 2, 'the recorded and the noted event share a transaction')
  sink.calls[1]!.fail(new Error('connection reset'))
  const err = (await recorded) as AppError
  t.type(err, AppError)
  t.equal(err.status, 503)
  t.equal(err.code, 'unavailable')
  t.ok(w.stats().failing)
  await sink.started(3)
  t.equal(sink.calls[2]!.rows.length, 1, 'the noted event is tried again, alone')
  sink.calls[2]!.fail(new Error('again'))
  await sink.started(4)
  sink.calls[3]!.fail(new Error('and again'))
  await w.flush()
  t.equal(sink.calls.length, 4, 'three attempts for the noted event in all')
  t.equal(w.stats().dropped, 1)
  t.ok(logs.some((l) => l.includes('dropped')))
  const ok = w.record(events(1))
  await sink.started(5)
  sink.calls[4]!.done()
  await ok
  t.notOk(w.stats().failing, 'recovers with the next commit')
})

t.test('a write that does not finish in time: 503, and waiting events are withdrawn', async (t) => {
  const sink = manualSink()
  const w = writer(sink.write, { timeoutMs: 30 })
  const inFlight = settled(w.record(events(1)))
  await sink.started(1)
  const queued = settled(w.record(events(2)))
  t.match(await inFlight, { status: 503 })
  t.match(await queued, { status: 503 })
  sink.calls[0]!.done()
  await w.flush()
  t.equal(sink.calls.length, 1, 'the withdrawn events never reach the database')
  t.equal(w.stats().queued, 0)
})

t.test('a full queue refuses at once: record with 503, note by dropping; notes never take the last half', async (t) => {
  const sink = manualSink()
  const w = writer(sink.write, { queueMaxEvents: 6 })
  const blocker = w.record(events(1))
  await sink.started(1)
  w.note(events(4))
  t.equal(w.stats().dropped, 4, 'noted events beyond half the queue are dropped')
  w.note(events(3))
  t.equal(w.stats().queued, 3)
  const fits = w.record(events(3))
  t.match(await settled(w.record(events(1))), { status: 503, detail: /queue is full/ })
  sink.calls[0]!.done()
  await blocker
  await sink.started(2)
  sink.calls[1]!.done()
  await fits
  t.equal(w.stats().written, 7)
})

t.test('a malformed event is a programming error: record rejects, note logs, nothing is written', async (t) => {
  const sink = manualSink()
  const w = writer(sink.write)
  const bad = { ...event(), action: 'token.peek' } as unknown as AuditEvent
  t.type(await settled(w.record([event(), bad])), AuditEventError)
  w.note([bad])
  t.ok(logs.some((l) => l.includes('refused')))
  t.equal(w.stats().dropped, 1, 'and counted as dropped, so the metric shows it')
  await w.flush()
  t.equal(sink.calls.length, 0)
})

t.test('close writes what is queued, then refuses', async (t) => {
  const sink = manualSink()
  const w = writer(sink.write)
  const a = w.record(events(1))
  await sink.started(1)
  w.note(events(2))
  const closing = w.close()
  t.match(await settled(w.record(events(1))), { status: 503, detail: /shutting down/ })
  sink.calls[0]!.done()
  await sink.started(2)
  sink.calls[1]!.done()
  await closing
  await a
  t.equal(w.stats().written, 3)
})

t.test('close gives up after the time-out on a database that does not answer', async (t) => {
  const sink = manualSink()
  const w = writer(sink.write, { timeoutMs: 20 })
  const a = settled(w.record(events(1)))
  await sink.started(1)
  w.note(events(1))
  await w.close()
  t.match(await a, { status: 503 })
  t.equal(w.stats().dropped, 1)
})

t.test('a note on an idle writer waits for the next record and shares its transaction; alone, it is written after the linger', async (t) => {
  const sink = manualSink()
  const w = writer(sink.write, { noteLingerMs: 60_000 })
  w.note(events(1))
  await new Promise((r) => setImmediate(r))
  t.equal(sink.calls.length, 0, 'no transaction for the note alone yet')
  const recorded = w.record(events(2))
  await sink.started(1)
  t.equal(sink.calls[0]!.rows.length, 3, 'the noted and the recorded events share one transaction')
  sink.calls[0]!.done()
  await recorded

  const soon = writer(sink.write, { noteLingerMs: 1 })
  soon.note(events(1))
  await new Promise((r) => setTimeout(r, 20)) // the linger timer is unref'd: something must keep the process up
  await sink.started(2)
  t.equal(sink.calls[1]!.rows.length, 1, 'written once the linger passed')
  sink.calls[1]!.done()
  const flushed = writer(sink.write, { noteLingerMs: 60_000 })
  flushed.note(events(1))
  const flushing = flushed.flush()
  await sink.started(3)
  sink.calls[2]!.done()
  await flushing
  t.equal(flushed.stats().written, 1, 'flush does not wait for the linger')
})

t.test('noted events left after a transaction wait for the linger too, unless a record comes or they fill a batch', async (t) => {
  const sink = manualSink()
  const w = writer(sink.write, { noteLingerMs: 60_000, batchMaxEvents: 10 })
  const first = w.record(events(1))
  await sink.started(1)
  w.note(events(3))
  sink.calls[0]!.done()
  await first
  await new Promise((r) => setImmediate(r))
  t.equal(sink.calls.length, 1, 'the three noted events do not start a transaction of their own')
  w.note(events(4))
  await new Promise((r) => setImmediate(r))
  t.equal(sink.calls.length, 1, 'seven noted events: still waiting')
  const recorded = w.record(events(1))
  await sink.started(2)
  t.equal(sink.calls[1]!.rows.length, 8, 'a record takes them along at once')
  sink.calls[1]!.done()
  await recorded

  const blocker = w.record(events(1))
  await sink.started(3)
  w.note(events(6))
  w.note(events(5))
  sink.calls[2]!.done()
  await blocker
  await sink.started(4)
  t.equal(sink.calls[3]!.rows.length, 6, 'a batch worth of noted events goes without waiting (whole groups, at most batchMaxEvents)')
  sink.calls[3]!.done()
  const flushing = w.flush()
  await sink.started(5)
  t.equal(sink.calls[4]!.rows.length, 5, 'flush writes what lingers after the last transaction')
  sink.calls[4]!.done()
  await flushing
  t.match(w.stats(), { written: 21, queued: 0 })
})
