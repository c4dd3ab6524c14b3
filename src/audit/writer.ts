import type { Logger } from 'pino'
import { AppError } from '../errors/index.js'
import type { UnsealedAuditRow } from '../store/index.js'
import type { AuditEvent } from './events.js'
import { eventsToRows } from './rows.js'

export interface AuditWriterOptions {
  /** Writes one batch in one transaction; rejects if nothing of it was written. */
  write(rows: UnsealedAuditRow[]): Promise<void>
  logger: Pick<Logger, 'error' | 'warn'>
  /** Events waiting (queued, not yet in a transaction) beyond which new ones are refused. */
  queueMaxEvents: number
  /** Events per transaction (a single request's group is never split). */
  batchMaxEvents: number
  /** How long `record` waits for durability before the caller gets 503. */
  timeoutMs: number
  /** Pause after a failed batch before the next attempt, so a database that is down is not hammered. */
  retryDelayMs?: number
  /** How long a noted event that finds the writer idle waits for recorded ones to share its transaction. */
  noteLingerMs?: number
  now?: () => Date
}

export interface AuditWriterStats {
  queued: number
  written: number
  batches: number
  dropped: number
  /** The last batch failed and none has succeeded since. */
  failing: boolean
}

/**
 * A request's events, written together. A recorded (durable) group's caller waits on `waiter`
 * until `settle` answers it, once, on durability or on refusal.
 */
interface Group {
  rows: UnsealedAuditRow[]
  durable: boolean
  cancelled: boolean
  attempts: number
  waiter: Waiter | undefined
}

interface Waiter {
  resolve(): void
  reject(err: Error): void
  timer: NodeJS.Timeout
}

/** The groups of one chain (tenant) and its one transaction in flight. */
interface Lane {
  queue: Group[]
  /** Durable groups in `queue`: while there is one, the next transaction starts at once. */
  durable: number
  /** Noted events in `queue`. */
  noted: number
  writing: Promise<void> | undefined
  lingering: NodeJS.Timeout | undefined
}

const NOTE_ATTEMPTS = 3
/** Groups whose events span tenants (none today) are written on a lane of their own. */
const MIXED = '*'

export const auditUnavailable = (why: string) =>
  new AppError('unavailable', { detail: `The audit log cannot be written (${why}); nothing was revealed.` })

/**
 * Answers a group's caller (if it still waits) and drops the group's references to it.
 * Deliberately no closure per group. With one (a `settle` function that replaced itself when
 * called), requests' objects outlived young-generation collections: `/proxy` with one token at
 * 32 connections promoted 2.4–3.2 MB per scavenge at 16–17 ms each, against 0.5 MB and 6.2–6.5 ms
 * with this shape (V8's `--trace-gc-nvp`, same host, same minutes).
 */
function settle(group: Group, err?: Error): void {
  const waiter = group.waiter
  if (waiter === undefined) return
  group.waiter = undefined
  clearTimeout(waiter.timer)
  if (err) waiter.reject(err)
  else waiter.resolve()
}

function timedOut(group: Group): void {
  group.cancelled = true
  settle(group, auditUnavailable('it timed out'))
}

/**
 * Group commit: events wait in one bounded queue, split into a lane per tenant (each tenant's
 * entries form one chain, appended one batch at a time; different tenants' batches go in
 * parallel). A lane runs one transaction at a time, taking everything waiting (up to
 * `batchMaxEvents`), so under load many requests share one insert and one commit and an idle
 * lane starts at once. `record` is the fail-closed path: it resolves only when the events are
 * committed and rejects with 503 `unavailable` when the queue is full, the write failed or
 * `timeoutMs` passed (events still waiting are then withdrawn; a batch already in a
 * transaction may yet commit, so an entry can exist for a request that answered 503). `note` is
 * the cheaper path for events that reveal nothing: the caller does not wait, an idle lane
 * waits `noteLingerMs` for company; a failed write is retried twice, and what cannot be written
 * or queued is logged as dropped. Noted events never start a transaction before `noteLingerMs`
 * passed, unless they fill a batch: when only they remain after a transaction, they wait for
 * company too, so under a load of noted events (calls that reveal nothing) a transaction carries
 * about `noteLingerMs` worth of them instead of the few that arrived during the last commit.
 */
export function createAuditWriter(options: AuditWriterOptions) {
  const now = options.now ?? (() => new Date())
  const retryDelayMs = options.retryDelayMs ?? 100
  const noteLingerMs = options.noteLingerMs ?? 20
  const lanes = new Map<string, Lane>()
  let queued = 0
  let pausedUntil = 0
  let closing = false
  const stats = { written: 0, batches: 0, dropped: 0, failing: false }

  const toRows = (events: readonly AuditEvent[]) => eventsToRows(events, now())

  function laneOf(group: Group): Lane {
    const tenant = group.rows[0]!.tenant_id
    const key = group.rows.every((r) => r.tenant_id === tenant) ? tenant : MIXED
    let lane = lanes.get(key)
    if (lane === undefined) lanes.set(key, (lane = { queue: [], durable: 0, noted: 0, writing: undefined, lingering: undefined }))
    return lane
  }

  // A recorded group starts a transaction at once (or right after the one in flight); noted
  // ones wait briefly, so a proxy call's proxy.response rides along with the next call's
  // proxy.request instead of costing a commit of its own.
  function enqueue(group: Group, lane = laneOf(group)): void {
    lane.queue.push(group)
    queued += group.rows.length
    if (group.durable) lane.durable += 1
    else lane.noted += group.rows.length
    if (!lane.writing) next(lane, true)
  }

  /** What an idle lane does with its queue: a transaction now, or a linger for noted events. */
  function next(lane: Lane, lastWriteOk: boolean): void {
    if (lane.queue.length === 0) return
    if (lane.durable > 0 || lane.noted >= options.batchMaxEvents || !lastWriteOk) return schedule(lane)
    lane.lingering ??= setTimeout(() => ((lane.lingering = undefined), schedule(lane)), noteLingerMs)
    lane.lingering.unref()
  }

  function schedule(lane: Lane): void {
    if (lane.writing || lane.queue.length === 0) return
    clearTimeout(lane.lingering)
    lane.lingering = undefined
    const wait = pausedUntil - Date.now()
    const step = wait > 0 ? new Promise<boolean>((resolve) => setTimeout(() => resolve(false), wait)) : writeBatch(lane)
    lane.writing = step.then((ok) => ((lane.writing = undefined), next(lane, ok)))
  }

  function take(lane: Lane): Group[] {
    const batch: Group[] = []
    let size = 0
    while (lane.queue.length > 0) {
      const group = lane.queue[0]!
      if (!group.cancelled && batch.length > 0 && size + group.rows.length > options.batchMaxEvents) break
      lane.queue.shift()
      queued -= group.rows.length
      if (group.durable) lane.durable -= 1
      else lane.noted -= group.rows.length
      if (group.cancelled) continue
      batch.push(group)
      size += group.rows.length
    }
    return batch
  }

  /** Resolves with whether the batch was written (never rejects). */
  async function writeBatch(lane: Lane): Promise<boolean> {
    const batch = take(lane)
    if (batch.length === 0) return true
    const rows = batch.length === 1 ? batch[0]!.rows : batch.flatMap((g) => g.rows)
    try {
      await options.write(rows)
      stats.written += rows.length
      stats.batches += 1
      stats.failing = false
      for (const g of batch) settle(g)
      return true
    } catch (err) {
      stats.failing = true
      pausedUntil = Date.now() + retryDelayMs
      options.logger.error({ err, events: rows.length }, 'audit write failed')
      failed(lane, batch)
      return false
    }
  }

  function failed(lane: Lane, batch: Group[]): void {
    const retry: Group[] = []
    for (const g of batch) {
      if (g.durable) settle(g, auditUnavailable('the write failed'))
      else if (++g.attempts < NOTE_ATTEMPTS && !admissible(g.rows.length, false)) retry.push(g)
      else drop(g.rows.length, 'the write failed')
    }
    lane.queue = [...retry, ...lane.queue]
    const retried = retry.reduce((n, g) => n + g.rows.length, 0)
    queued += retried
    lane.noted += retried
  }

  function drop(count: number, why: string): void {
    stats.dropped += count
    options.logger.error({ events: count }, `audit events dropped: ${why}`)
  }

  // Noted events may fill only half the queue: a flood of refusals must not crowd out the
  // events that data waits on.
  function admissible(count: number, durable: boolean): string | undefined {
    if (closing) return 'shutting down'
    if (queued + count > (durable ? options.queueMaxEvents : options.queueMaxEvents / 2)) return 'the queue is full'
    return undefined
  }

  const busy = () => [...lanes.values()].flatMap((lane) => (lane.writing ? [lane.writing] : []))

  return {
    /** Resolves once `events` are committed; rejects with AppError('unavailable') otherwise. */
    record(events: readonly AuditEvent[]): Promise<void> {
      if (events.length === 0) return Promise.resolve()
      let rows: UnsealedAuditRow[]
      try {
        rows = toRows(events)
      } catch (err) {
        return Promise.reject(err instanceof Error ? err : new Error(String(err)))
      }
      const refused = admissible(rows.length, true)
      if (refused) return Promise.reject(auditUnavailable(refused))
      return new Promise<void>((resolve, reject) => {
        const group: Group = { rows, durable: true, cancelled: false, attempts: 0, waiter: undefined }
        group.waiter = { resolve, reject, timer: setTimeout(timedOut, options.timeoutMs, group) }
        enqueue(group)
      })
    },

    /** Queues `events` without waiting; never throws. */
    note(events: readonly AuditEvent[]): void {
      if (events.length === 0) return
      let rows: UnsealedAuditRow[]
      try {
        rows = toRows(events)
      } catch (err) {
        options.logger.error({ err }, 'audit event refused')
        return drop(events.length, 'an event was malformed')
      }
      const refused = admissible(rows.length, false)
      if (refused) return drop(rows.length, refused)
      enqueue({ rows, durable: false, cancelled: false, attempts: 0, waiter: undefined })
    },

    /** Resolves when everything queued so far has been written or given up. */
    async flush(): Promise<void> {
      for (;;) {
        for (const lane of lanes.values()) if (lane.lingering) schedule(lane)
        const waiting = busy()
        if (waiting.length === 0) return
        await Promise.all(waiting)
      }
    },

    /** Refuses new events, writes what is queued (for at most `timeoutMs`), gives up the rest. */
    async close(): Promise<void> {
      closing = true
      let timer: NodeJS.Timeout | undefined
      await Promise.race([this.flush(), new Promise<void>((resolve) => (timer = setTimeout(resolve, options.timeoutMs)))])
      clearTimeout(timer)
      for (const lane of lanes.values()) {
        const rest = lane.queue.filter((g) => !g.cancelled)
        lane.queue = []
        lane.durable = lane.noted = 0
        for (const g of rest) {
          if (g.durable) settle(g, auditUnavailable('shutting down'))
          else drop(g.rows.length, 'shutting down')
        }
      }
      queued = 0
    },

    stats(): AuditWriterStats {
      return { queued, ...stats }
    },
  }
}

export type AuditWriter = ReturnType<typeof createAuditWriter>
