import type { Knex } from 'knex'
import type { DatabaseKind } from '../database.js'
import { runDirect, type DirectStatement } from '../bounded-client.js'

/** An audit entry as stored (see migrations/..._audit.ts); `hash` seals it into its tenant's chain. */
export interface AuditRow {
  tenant_id: string
  seq: number
  id: string
  occurred_at: Date
  actor_kind: string
  actor_id: string | null
  action: string
  target_type: string | null
  target_ids: string[]
  token_ids: string[]
  outcome: string
  status: number
  transform: string | null
  permission: string | null
  trace_id: string | null
  client_ip: string | null
  request_method: string | null
  request_route: string | null
  destination_origin: string | null
  destination_method: string | null
  destination_status: number | null
  duration_ms: number | null
  parent_id: string | null
  key_id: string
  hash: string
}

export type UnsealedAuditRow = Omit<AuditRow, 'seq' | 'key_id' | 'hash'>

/** The last entry of a tenant's chain and its last checkpoint; locked while a batch appends. */
export interface ChainHead {
  tenant_id: string
  seq: number
  hash: string
  checkpoint_seq: number
  checkpoint_at: Date | null
}

export interface CheckpointRow {
  tenant_id: string
  seq: number
  hash: string
  created_at: Date
  key_id: string
  signature: string
}

/** Called with each tenant's locked head: seals that tenant's rows and says what to store. */
export type ChainSealer = (head: ChainHead, rows: UnsealedAuditRow[]) => { rows: AuditRow[]; head: ChainHead; checkpoint?: CheckpointRow }

export interface AuditFilter {
  from?: Date
  to?: Date
  actions: string[]
  actorId?: string
  actorKind?: string
  targetType?: string
  /** Any of these among an entry's target ids or the token ids it detokenized. */
  targetIds?: string[]
  outcomes: string[]
  /** Export only: entries after this seq, in chain order (how a SIEM resumes without missing one). */
  afterSeq?: number
}

/** Where a listing stopped: entries sort by (occurred_at, seq). */
export interface AuditPosition {
  occurredAt: Date
  seq: number
}

/**
 * See `appendAfter`: the head moves only if it is where the writer sealed from, and the rows go
 * in only if it moved. The rows travel as one JSON array (one parameter; Postgres's own parser
 * takes it apart) of entries as the chain hashed them: each is the chain's canonical array
 * (src/audit/chain.ts: a tag, then every column but the hash, in the order below) with the hash
 * appended, so element i + 1 is column i. Serialized once, for the hash and the insert.
 */
const APPEND_COLUMNS = [
  ['tenant_id', 'uuid'], ['seq', 'bigint'], ['id', 'uuid'], ['occurred_at', 'timestamptz'], ['actor_kind', 'text'], ['actor_id', 'uuid'],
  ['action', 'text'], ['target_type', 'text'], ['target_ids', 'jsonb'], ['token_ids', 'jsonb'], ['outcome', 'text'], ['status', 'smallint'],
  ['transform', 'text'], ['permission', 'text'], ['trace_id', 'text'], ['client_ip', 'text'], ['request_method', 'text'], ['request_route', 'text'],
  ['destination_origin', 'text'], ['destination_method', 'text'], ['destination_status', 'smallint'], ['duration_ms', 'integer'], ['parent_id', 'uuid'],
  ['key_id', 'text'], ['hash', 'text'],
] as const satisfies readonly (readonly [keyof AuditRow, string])[]

const APPEND_AFTER: DirectStatement = {
  name: 'tessera_audit_append_after',
  text: `
with head as (
  update audit_chain_heads set seq = $1, hash = $2
  where tenant_id = $3 and seq = $4 and hash = $5
  returning tenant_id
), inserted as (
  insert into audit_events (${APPEND_COLUMNS.map(([name]) => name).join(', ')})
  select ${APPEND_COLUMNS.map(([, type], i) => (type === 'jsonb' ? `r->${i + 1}` : `(r->>${i + 1})::${type}`)).join(', ')}
  from jsonb_array_elements($6::jsonb) as r
  where exists (select 1 from head)
  returning 1
)
select count(*)::int as n from inserted`,
}

interface AppendOptions {
  seal: ChainSealer
  genesisHash: string
  timeoutMs: number
}

const INSERT_CHUNK = 1000
const PRUNE_CHUNK = 10_000

const toNumber = (v: unknown): number => (typeof v === 'number' ? v : Number(v))
const parseRow = <R extends AuditRow>(r: R): R => ({ ...r, seq: toNumber(r.seq) })
const parseHead = (h: ChainHead): ChainHead => ({ ...h, seq: toNumber(h.seq), checkpoint_seq: toNumber(h.checkpoint_seq) })
const parseCheckpoint = (c: CheckpointRow): CheckpointRow => ({ ...c, seq: toNumber(c.seq) })

export function auditRepository(knex: Knex, kind: DatabaseKind) {
  /** Server-side bounds for one transaction's statements and lock waits (PGlite runs in process). */
  const bound = async (trx: Knex.Transaction, timeoutMs: number) => {
    if (kind === 'postgres') await trx.raw("select set_config('statement_timeout', ?, true), set_config('lock_timeout', ?, true)", [String(timeoutMs), String(timeoutMs)])
  }

  /**
   * The heads of the rows' tenants are created if new and locked in tenant order (so processes
   * sharing the database never deadlock and append to a chain one at a time), then every entry
   * goes in with one insert and the heads move on.
   */
  async function appendIn(trx: Knex.Transaction, rows: UnsealedAuditRow[], options: AppendOptions): Promise<void> {
    const tenants = [...new Set(rows.map((r) => r.tenant_id))].sort()
    await bound(trx, options.timeoutMs)
    await trx('audit_chain_heads')
      .insert(tenants.map((tenant_id) => ({ tenant_id, seq: 0, hash: options.genesisHash, checkpoint_seq: 0, checkpoint_at: null })))
      .onConflict('tenant_id')
      .ignore()
    const heads = (await trx<ChainHead>('audit_chain_heads').whereIn('tenant_id', tenants).orderBy('tenant_id').forUpdate()).map(parseHead)
    // A batch retried after its answer was lost may have committed the first time: its
    // entries are in the chain already (the same ids) and are not appended again.
    const stored = new Set((await trx('audit_events').whereIn('id', rows.map((r) => r.id)).select('id')).map((r: { id: string }) => r.id))
    const fresh = stored.size === 0 ? rows : rows.filter((r) => !stored.has(r.id))
    const sealed = heads.map((head) => options.seal(head, fresh.filter((r) => r.tenant_id === head.tenant_id)))
    const entries = sealed.flatMap((s) => s.rows)
    for (let i = 0; i < entries.length; i += INSERT_CHUNK) {
      await trx('audit_events').insert(entries.slice(i, i + INSERT_CHUNK).map(toDb))
    }
    await updateHeads(trx, sealed.map((s) => s.head))
    const checkpoints = sealed.flatMap((s) => (s.checkpoint ? [s.checkpoint] : []))
    if (checkpoints.length) await trx('audit_checkpoints').insert(checkpoints)
  }

  return {
    /** One transaction for a whole batch (see appendIn). */
    async append(rows: UnsealedAuditRow[], options: AppendOptions): Promise<void> {
      await knex.transaction((trx) => appendIn(trx, rows, options))
    },

    /** `append` inside the caller's transaction: the entries commit or roll back with it. */
    appendIn,

    /**
     * One tenant's already sealed entries (`stored`: each a JSON array, see APPEND_COLUMNS) in
     * one statement (one round trip, its own commit), but only if the chain head is still
     * `expected`: the head moves to `next` and the rows go in together, or nothing happens and
     * it answers false (another process appended meanwhile, or the head was never stored). A
     * concurrent append to the same chain waits on the head's row lock and then finds it moved,
     * so two writers never fork a chain.
     */
    async appendAfter(expected: Pick<ChainHead, 'tenant_id' | 'seq' | 'hash'>, stored: readonly string[], next: Pick<ChainHead, 'seq' | 'hash'>): Promise<boolean> {
      const result = await runDirect(knex, APPEND_AFTER, [next.seq, next.hash, expected.tenant_id, expected.seq, expected.hash, `[${stored.join(',')}]`])
      return stored.length > 0 && toNumber(result[0]?.n ?? 0) === stored.length
    },

    /** Entries of one tenant matching `filter`, newest first (`desc`) or oldest first, after `after`. */
    async list(tenantId: string, filter: AuditFilter, order: 'asc' | 'desc', after: AuditPosition | undefined, limit: number): Promise<AuditRow[]> {
      const q = filtered(knex<AuditRow>('audit_events').where({ tenant_id: tenantId }), filter)
      if (after) void q.whereRaw(`(occurred_at, seq) ${order === 'desc' ? '<' : '>'} (?, ?)`, [after.occurredAt, after.seq])
      const rows: AuditRow[] = await q.orderBy([{ column: 'occurred_at', order }, { column: 'seq', order }]).limit(limit)
      return rows.map(parseRow)
    },

    /** Entries with `afterSeq` < seq <= `throughSeq` matching `filter`, in chain order. */
    async listBySeq(tenantId: string, filter: AuditFilter, afterSeq: number, throughSeq: number, limit: number): Promise<AuditRow[]> {
      const q = filtered(knex<AuditRow>('audit_events').where({ tenant_id: tenantId }), filter)
      const rows: AuditRow[] = await q.where('seq', '>', afterSeq).where('seq', '<=', throughSeq).orderBy('seq').limit(limit)
      return rows.map(parseRow)
    },

    /** The seq of a tenant's last committed entry (0 for none): its entries up to it are all visible. */
    async headSeq(tenantId: string): Promise<number> {
      const head = await knex<ChainHead>('audit_chain_heads').where({ tenant_id: tenantId }).first('seq')
      return toNumber(head?.seq ?? 0)
    },

    /**
     * Runs `fn` on one consistent, read-only snapshot (repeatable read), so a verification never
     * mistakes a batch committed or a prune finished meanwhile for a broken chain.
     */
    async snapshot<T>(fn: (reader: ChainReader) => Promise<T>): Promise<T> {
      return knex.transaction((trx) => fn(chainReader(trx)), { isolationLevel: 'repeatable read', readOnly: true })
    },

    /** Heads that moved since their last checkpoint. */
    async headsBehindCheckpoint(): Promise<ChainHead[]> {
      return (await knex<ChainHead>('audit_chain_heads').whereRaw('seq > checkpoint_seq').orderBy('tenant_id')).map(parseHead)
    },

    /** Locks a tenant's head and stores the checkpoint `make` returns for it, if any. */
    async checkpointHead(tenantId: string, make: (head: ChainHead) => CheckpointRow | undefined, timeoutMs: number): Promise<boolean> {
      return knex.transaction(async (trx) => {
        await bound(trx, timeoutMs)
        const row = await trx<ChainHead>('audit_chain_heads').where({ tenant_id: tenantId }).forUpdate().first()
        const cp = row && make(parseHead(row))
        if (!cp) return false
        await trx('audit_checkpoints').insert(cp).onConflict(['tenant_id', 'seq']).ignore()
        await trx('audit_chain_heads').where({ tenant_id: tenantId }).update({ checkpoint_seq: cp.seq, checkpoint_at: cp.created_at })
        return true
      })
    },

    /** The database's own clock (on PGlite, this process's). */
    async databaseNow(): Promise<Date> {
      const row = await knex.first(knex.raw('now() as now'))
      return new Date(row.now as string | Date)
    },

    async tenantsWithCheckpoints(before: Date): Promise<string[]> {
      const rows = await knex('audit_checkpoints').distinct('tenant_id').where('created_at', '<', before).orderBy('tenant_id')
      return rows.map((r: { tenant_id: string }) => r.tenant_id)
    },

    /**
     * Removes a tenant's entries up to its newest checkpoint created before `cutoff` that no
     * entry at or before it is younger than, and the checkpoints before that one, in one
     * transaction: that checkpoint stays as the anchor the remaining chain is verified from.
     * The entries' own times are checked as well as the checkpoint's: a checkpoint written by
     * a process whose clock ran behind must not take fresh entries with it. Returns the number
     * of entries removed.
     */
    async pruneTenant(tenantId: string, cutoff: Date): Promise<number> {
      return knex.transaction(async (trx) => {
        const young = await trx('audit_events').where({ tenant_id: tenantId }).where('occurred_at', '>=', cutoff).min<{ min: number | string | null }[]>({ min: 'seq' }).first()
        const anchors = trx<CheckpointRow>('audit_checkpoints').where({ tenant_id: tenantId }).where('created_at', '<', cutoff)
        if (young?.min != null) void anchors.where('seq', '<', young.min)
        const anchor = await anchors.orderBy('seq', 'desc').first()
        if (!anchor) return 0
        const anchorSeq = toNumber(anchor.seq)
        await trx('audit_checkpoints').where({ tenant_id: tenantId }).where('seq', '<', anchorSeq).delete()
        const oldest = await trx('audit_events').where({ tenant_id: tenantId }).min<{ min: number | string | null }[]>({ min: 'seq' }).first()
        let removed = 0
        for (let from = toNumber(oldest?.min ?? anchorSeq + 1) - 1; from < anchorSeq; from += PRUNE_CHUNK) {
          const deleted = await trx.raw<{ rows: { n: number }[] }>(
            'with d as (delete from audit_events where tenant_id = ? and seq > ? and seq <= ? returning 1) select count(*)::int as n from d',
            [tenantId, from, Math.min(from + PRUNE_CHUNK, anchorSeq)],
          )
          removed += toNumber(deleted.rows[0]?.n ?? 0)
        }
        return removed
      })
    },
  }
}

function filtered(q: Knex.QueryBuilder<AuditRow>, filter: AuditFilter): Knex.QueryBuilder<AuditRow> {
  if (filter.from) void q.where('occurred_at', '>=', filter.from)
  if (filter.to) void q.where('occurred_at', '<', filter.to)
  if (filter.actions.length) void q.whereIn('action', filter.actions)
  if (filter.outcomes.length) void q.whereIn('outcome', filter.outcomes)
  if (filter.actorId) void q.where('actor_id', filter.actorId)
  if (filter.actorKind) void q.where('actor_kind', filter.actorKind)
  if (filter.targetType) void q.where('target_type', filter.targetType)
  if (filter.targetIds?.length) {
    const ids = filter.targetIds
    void q.where((any) => {
      for (const id of ids) void any.orWhereRaw('(target_ids || token_ids) @> ?::jsonb', [JSON.stringify([id])])
    })
  }
  return q
}

/** Reads of one chain inside a snapshot (see `snapshot`). */
export interface ChainReader {
  tenantIds(): Promise<string[]>
  head(tenantId: string): Promise<ChainHead | undefined>
  checkpoints(tenantId: string): Promise<CheckpointRow[]>
  /** Entries with seq > afterSeq, ascending, at most `limit`. */
  /** `afterSeq` null: from the lowest seq stored, however low (a forged row below -2^53 included). */
  entries(tenantId: string, afterSeq: number | null, limit: number): Promise<ChainEntry[]>
}

/** An entry as the verifier reads it. */
export interface ChainEntry extends AuditRow {
  /** `occurred_at` holds digits below a millisecond, which no writer stores: it was changed. */
  sub_ms: boolean
}

function chainReader(trx: Knex.Transaction): ChainReader {
  return {
    async tenantIds() {
      const rows = await trx.raw<{ rows: { tenant_id: string }[] }>(
        'select tenant_id from audit_chain_heads union select tenant_id from audit_checkpoints union select distinct tenant_id from audit_events order by tenant_id',
      )
      return rows.rows.map((r) => r.tenant_id)
    },
    async head(tenantId) {
      const row = await trx<ChainHead>('audit_chain_heads').where({ tenant_id: tenantId }).first()
      return row && parseHead(row)
    },
    async checkpoints(tenantId) {
      return (await trx<CheckpointRow>('audit_checkpoints').where({ tenant_id: tenantId }).orderBy('seq')).map(parseCheckpoint)
    },
    async entries(tenantId, afterSeq, limit) {
      // Times are read into a Date, which holds milliseconds: a change below one would not show in the hash.
      const query = trx<AuditRow>('audit_events')
        .select('*', trx.raw("date_trunc('milliseconds', occurred_at) <> occurred_at as sub_ms"))
        .where({ tenant_id: tenantId })
      if (afterSeq !== null) void query.where('seq', '>', afterSeq)
      const rows = await query
        .orderBy('seq')
        .limit(limit)
      return rows.map((r) => parseRow(r as ChainEntry))
    },
  }
}

function toDb(row: AuditRow): Record<string, unknown> {
  return { ...row, target_ids: JSON.stringify(row.target_ids), token_ids: JSON.stringify(row.token_ids) }
}

async function updateHeads(trx: Knex.Transaction, heads: ChainHead[]): Promise<void> {
  if (!heads.length) return
  const values = heads.map(() => '(?::uuid, ?::bigint, ?, ?::bigint, ?::timestamptz)').join(', ')
  await trx.raw(
    `update audit_chain_heads as h set seq = v.seq, hash = v.hash, checkpoint_seq = v.checkpoint_seq, checkpoint_at = v.checkpoint_at
     from (values ${values}) as v(tenant_id, seq, hash, checkpoint_seq, checkpoint_at) where h.tenant_id = v.tenant_id`,
    heads.flatMap((h) => [h.tenant_id, h.seq, h.hash, h.checkpoint_seq, h.checkpoint_at]),
  )
}

export type AuditRepository = ReturnType<typeof auditRepository>
