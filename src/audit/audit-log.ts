import type { Logger } from 'pino'
import type { Config } from '../config/index.js'
import type { AuditFilter, AuditPosition, AuditRow, ChainHead, ChainSealer, Store, StoreTransaction, UnsealedAuditRow } from '../store/index.js'
import type { AuditKeyring } from './audit-keys.js'
import { GENESIS_HASH, sealRows } from './chain.js'
import type { AuditEvent } from './events.js'
import { checkpointAt, checkpointChains, pruneExpired } from './maintenance.js'
import { verifyAuditChain, type AuditVerification } from './verify.js'
import { eventsToRows } from './rows.js'
import { auditUnavailable, createAuditWriter, type AuditWriterStats } from './writer.js'

/**
 * What request paths call. `record` is for events that reveal or use data: await it before the
 * plaintext leaves; it rejects with AppError('unavailable') (503) when the events could not be
 * made durable, and then nothing may be revealed. `note` is for events that reveal nothing.
 * Pass all of one request's events in one call: they are written together.
 */
export interface AuditRecorder {
  record(events: readonly AuditEvent[]): Promise<void>
  note(events: readonly AuditEvent[]): void
  /**
   * `record`, but inside the caller's transaction `trx`: the events commit or roll back with
   * what it writes (a new tenant and the first entries of its chain, all or nothing). Rejects
   * with AppError('unavailable') (503) when they cannot be written; the transaction then fails.
   */
  recordIn(trx: StoreTransaction, events: readonly AuditEvent[]): Promise<void>
}

export interface AuditLog extends AuditRecorder {
  /** One page of a tenant's entries, newest first, after `after`. */
  list(tenantId: string, filter: AuditFilter, after: AuditPosition | undefined, limit: number): Promise<AuditRow[]>
  /** A tenant's entries oldest first, read in bounded chunks as the consumer pulls. */
  export(tenantId: string, filter: AuditFilter): AsyncGenerator<AuditRow>
  /** Checkpoints moved chains, then prunes expired entries. */
  maintain(now?: Date): Promise<{ checkpoints: number; pruned: number }>
  verify(options?: { tenantId?: string; now?: Date }): Promise<AuditVerification>
  stats(): AuditWriterStats
  flush(): Promise<void>
  close(): Promise<void>
}

const EXPORT_CHUNK = 500

export function createAuditLog(deps: { store: Store; keyring: AuditKeyring; config: Config['audit']; logger: Logger; now?: () => Date }): AuditLog {
  const { store, keyring, config, logger } = deps
  const now = deps.now ?? (() => new Date())
  const repo = store.audit

  // Runs with each tenant's head locked, inside the batch's transaction (or on a known head, see `write`).
  // `stored`: the entries as the one-statement append sends them (see sealRows).
  const seal = (head: ChainHead, rows: UnsealedAuditRow[]): ReturnType<ChainSealer> & { stored: string[] } => {
    const sealed = sealRows(keyring.primary, head, rows)
    const moved = { ...head, seq: sealed.seq, hash: sealed.hash }
    const checkpoint = sealed.seq - head.checkpoint_seq >= config.checkpointEvery ? checkpointAt(keyring.primary, moved, now()) : undefined
    return checkpoint
      ? { rows: sealed.rows, stored: sealed.stored, head: { ...moved, checkpoint_seq: checkpoint.seq, checkpoint_at: checkpoint.created_at }, checkpoint }
      : { rows: sealed.rows, stored: sealed.stored, head: moved }
  }

  // Each chain's head as this process last wrote or read it. With it, a batch of one tenant is
  // sealed here and stored in one statement that checks the head has not moved (one round trip
  // instead of a locking transaction); when it has (another process appended), when the head is
  // not known yet or a checkpoint is due, the locking transaction does it and tells us the head.
  const heads = new Map<string, ChainHead>()
  const write = async (rows: UnsealedAuditRow[]): Promise<void> => {
    const tenant = rows[0]!.tenant_id
    const known = heads.get(tenant)
    if (known && rows.every((r) => r.tenant_id === tenant)) {
      const sealed = seal(known, rows)
      if (!sealed.checkpoint) {
        if (await repo.appendAfter(known, sealed.stored, sealed.head)) return void heads.set(tenant, sealed.head)
      }
    }
    const moved: ChainHead[] = []
    await repo.append(rows, { seal: (head, tenantRows) => { const sealed = seal(head, tenantRows); moved.push(sealed.head); return sealed }, genesisHash: GENESIS_HASH, timeoutMs: config.writeTimeoutMs })
    for (const head of moved) heads.set(head.tenant_id, head)
  }

  // The heads this moves are not remembered: the transaction may yet roll back. The next write
  // to such a chain takes the locking path and learns its head there.
  const recordIn = async (trx: StoreTransaction, events: readonly AuditEvent[]): Promise<void> => {
    const rows = eventsToRows(events, now())
    try {
      await repo.appendIn(trx, rows, { seal, genesisHash: GENESIS_HASH, timeoutMs: config.writeTimeoutMs })
    } catch (err) {
      logger.error({ err, events: rows.length }, 'audit write failed')
      throw auditUnavailable('the write failed')
    }
  }

  const writer = createAuditWriter({
    write,
    logger,
    queueMaxEvents: config.queueMaxEvents,
    batchMaxEvents: config.batchMaxEvents,
    timeoutMs: config.writeTimeoutMs,
    now,
  })

  // SVC_AUDIT_ENABLED=false (benchmarks): every path runs as usual, only the write is skipped.
  const enabled = config.enabled
  return {
    record: (events) => (enabled ? writer.record(events) : Promise.resolve()),
    note: (events) => (enabled ? writer.note(events) : undefined),
    recordIn: (trx, events) => (enabled ? recordIn(trx, events) : Promise.resolve()),
    list: (tenantId, filter, after, limit) => repo.list(tenantId, filter, 'desc', after, limit),
    async *export(tenantId, filter) {
      if (filter.afterSeq !== undefined) {
        // Up to the head as it is now, so the export ends while entries keep arriving.
        const through = await repo.headSeq(tenantId)
        for (let afterSeq = filter.afterSeq; ; ) {
          const rows = await repo.listBySeq(tenantId, filter, afterSeq, through, EXPORT_CHUNK)
          yield* rows
          if (rows.length < EXPORT_CHUNK) return
          afterSeq = rows.at(-1)!.seq
        }
      }
      let after: AuditPosition | undefined
      for (;;) {
        const rows = await repo.list(tenantId, filter, 'asc', after, EXPORT_CHUNK)
        yield* rows
        const last = rows.at(-1)
        if (!last || rows.length < EXPORT_CHUNK) return
        after = { occurredAt: last.occurred_at, seq: last.seq }
      }
    },
    async maintain(at = now()) {
      const checkpoints = await checkpointChains(repo, keyring.primary, at, config.writeTimeoutMs)
      const pruned = config.pruneInService ? await pruneExpired(repo, config.retentionDays, at) : 0
      return { checkpoints, pruned }
    },
    verify: (options = {}) => verifyAuditChain(repo, keyring, { retentionDays: config.retentionDays, ...options }),
    stats: () => writer.stats(),
    flush: () => writer.flush(),
    close: () => writer.close(),
  }
}
