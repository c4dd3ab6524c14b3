import type { Logger } from 'pino'
import type { Config } from '../config/index.js'
import type { AuditFilter, AuditPosition, AuditRow, ChainSealer, Store } from '../store/index.js'
import type { AuditKeyring } from './audit-keys.js'
import { GENESIS_HASH, sealRows } from './chain.js'
import type { AuditEvent } from './events.js'
import { checkpointAt, checkpointChains, pruneExpired } from './maintenance.js'
import { verifyAuditChain, type AuditVerification } from './verify.js'
import { createAuditWriter, type AuditWriterStats } from './writer.js'

/**
 * What request paths call. `record` is for events that reveal or use data: await it before the
 * plaintext leaves; it rejects with AppError('unavailable') (503) when the events could not be
 * made durable, and then nothing may be revealed. `note` is for events that reveal nothing.
 * Pass all of one request's events in one call: they are written together.
 */
export interface AuditRecorder {
  record(events: readonly AuditEvent[]): Promise<void>
  note(events: readonly AuditEvent[]): void
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

  // Runs with each tenant's head locked, inside the batch's transaction.
  const seal: ChainSealer = (head, rows) => {
    const sealed = sealRows(keyring.primary, head, rows)
    const moved = { ...head, seq: sealed.seq, hash: sealed.hash }
    const checkpoint = sealed.seq - head.checkpoint_seq >= config.checkpointEvery ? checkpointAt(keyring.primary, moved, now()) : undefined
    return checkpoint
      ? { rows: sealed.rows, head: { ...moved, checkpoint_seq: checkpoint.seq, checkpoint_at: checkpoint.created_at }, checkpoint }
      : { rows: sealed.rows, head: moved }
  }

  const writer = createAuditWriter({
    write: (rows) => repo.append(rows, { seal, genesisHash: GENESIS_HASH, timeoutMs: config.writeTimeoutMs }),
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
    list: (tenantId, filter, after, limit) => repo.list(tenantId, filter, 'desc', after, limit),
    async *export(tenantId, filter) {
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
