import type { Knex } from 'knex'
import type { Page } from './applications.js'

export interface TokenRecord {
  tenant_id: string
  id: string
  type: string
  containers: string[]
  metadata: Record<string, string>
  mask: unknown
  fingerprint: string | null
  fingerprint_expression: string | null
  search_indexes: string[]
  search_hashes: string[]
  key_id: string
  encrypted_key: Uint8Array
  ciphertext: Uint8Array
  expires_at: Date | null
  created_by: string | null
  created_at: Date
  modified_by: string | null
  modified_at: Date
}

/** A token-access predicate: the caller's grants as SQL, so lists count only what it may see. */
export interface AccessScope {
  /** True when a plain permission grants every token. */
  all: boolean
  containerPrefixes: string[]
  conditionSets: { attribute: 'id' | 'container'; operator: 'starts_with' | 'equals'; value: string }[][]
}

export interface TokenFilter {
  ids?: string[]
  types?: string[]
  containers?: string[]
  metadata?: Record<string, string>
  fingerprints?: string[]
  searchHashes?: string[]
}

const JSON_COLUMNS = ['containers', 'metadata', 'mask', 'search_indexes', 'search_hashes'] as const

function serialize(row: Partial<TokenRecord>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...row }
  for (const col of JSON_COLUMNS) if (col in row) out[col] = row[col] === null ? null : JSON.stringify(row[col])
  for (const col of ['encrypted_key', 'ciphertext'] as const) if (row[col]) out[col] = Buffer.from(row[col])
  return out
}

export function tokensRepository(knex: Knex) {
  const live = (trx: Knex = knex) =>
    trx<TokenRecord>('tokens').where((q) => q.whereNull('expires_at').orWhere('expires_at', '>', knex.fn.now()))

  function applyFilter(q: Knex.QueryBuilder, f: TokenFilter): void {
    if (f.ids?.length) void q.whereIn('id', f.ids)
    if (f.types?.length) void q.whereIn('type', f.types)
    for (const c of f.containers ?? []) void q.whereRaw('exists (select 1 from jsonb_array_elements_text(containers) c where starts_with(c, ?))', [c])
    if (f.metadata && Object.keys(f.metadata).length) void q.whereRaw('metadata @> ?::jsonb', [JSON.stringify(f.metadata)])
    if (f.fingerprints?.length) void q.whereIn('fingerprint', f.fingerprints)
    for (const h of f.searchHashes ?? []) void q.whereRaw('search_hashes @> ?::jsonb', [JSON.stringify([h])])
  }

  function applyScope(q: Knex.QueryBuilder, scope: AccessScope): void {
    if (scope.all) return
    void q.where((outer) => {
      void outer.whereRaw('false')
      for (const prefix of scope.containerPrefixes) {
        void outer.orWhereRaw('exists (select 1 from jsonb_array_elements_text(containers) c where starts_with(c, ?))', [prefix])
      }
      for (const set of scope.conditionSets) {
        void outer.orWhere((inner) => {
          for (const cond of set) {
            if (cond.attribute === 'id') {
              void (cond.operator === 'equals' ? inner.where('id', cond.value) : inner.whereRaw('starts_with(id, ?)', [cond.value]))
            } else {
              const test = cond.operator === 'equals' ? 'c = ?' : 'starts_with(c, ?)'
              void inner.whereRaw(`exists (select 1 from jsonb_array_elements_text(containers) c where ${test})`, [cond.value])
            }
          }
        })
      }
    })
  }

  return {
    async insert(row: TokenRecord, trx: Knex = knex): Promise<void> {
      await trx('tokens').insert(serialize(row))
    },
    async findById(tenantId: string, id: string): Promise<TokenRecord | undefined> {
      return live().where({ tenant_id: tenantId, id }).first()
    },
    /** Every live token among `ids`, in one query (expressions load all of a request's tokens at once). */
    async findMany(tenantId: string, ids: readonly string[]): Promise<TokenRecord[]> {
      if (ids.length === 0) return []
      return live().where({ tenant_id: tenantId }).whereIn('id', ids as string[])
    },
    /** Only the columns detokenization needs, for `ids` of one tenant, in one query. */
    async findManyForUse(tenantId: string, ids: readonly string[]) {
      return live()
        .where({ tenant_id: tenantId })
        .whereIn('id', ids as string[])
        .select('tenant_id', 'id', 'type', 'containers', 'mask', 'key_id', 'encrypted_key', 'ciphertext', 'expires_at')
    },
    async findByFingerprint(tenantId: string, type: string, fingerprint: string): Promise<TokenRecord | undefined> {
      return live().where({ tenant_id: tenantId, type, fingerprint }).orderBy('created_at').first()
    },
    async list(tenantId: string, filter: TokenFilter, scope: AccessScope, page: number, size: number): Promise<Page<TokenRecord>> {
      const base = live().where({ tenant_id: tenantId })
      applyFilter(base, filter)
      applyScope(base, scope)
      const [countRow, items] = await Promise.all([
        base.clone().count<{ count: number }[]>({ count: '*' }).first(),
        base.clone().orderBy([{ column: 'created_at' }, { column: 'id' }]).limit(size).offset((page - 1) * size),
      ])
      return { items, total: Number(countRow?.count ?? 0) }
    },
    async update(tenantId: string, id: string, patch: Partial<TokenRecord>, trx: Knex = knex): Promise<TokenRecord | undefined> {
      const [row] = await trx<TokenRecord>('tokens').where({ tenant_id: tenantId, id }).update(serialize(patch)).returning('*')
      return row as TokenRecord | undefined
    },
    async delete(tenantId: string, id: string): Promise<boolean> {
      // returning() rather than the affected-row count, which the PGlite dialect does not report.
      const rows = await live().where({ tenant_id: tenantId, id }).delete().returning(['id'])
      return rows.length > 0
    },
    async deleteExpired(now: Date): Promise<number> {
      const rows = await knex('tokens').where('expires_at', '<=', now).delete().returning(['id'])
      return rows.length
    },
    /** A batch of rows still wrapped under a key other than `keyId`, for resumable re-wrapping. */
    async findWrappedNotUnder(keyId: string, limit: number): Promise<Pick<TokenRecord, 'tenant_id' | 'id' | 'key_id' | 'encrypted_key'>[]> {
      return knex<TokenRecord>('tokens').whereNot('key_id', keyId).select('tenant_id', 'id', 'key_id', 'encrypted_key').limit(limit)
    },
    /** Swaps the wrapping only if nobody changed it meanwhile (the server keeps running during a rewrap). */
    async replaceWrapping(row: { tenant_id: string; id: string; key_id: string }, next: { key_id: string; encrypted_key: Uint8Array }): Promise<boolean> {
      const rows = await knex('tokens')
        .where({ tenant_id: row.tenant_id, id: row.id, key_id: row.key_id })
        .update({ key_id: next.key_id, encrypted_key: Buffer.from(next.encrypted_key) })
        .returning(['id'])
      return rows.length > 0
    },
    async count(): Promise<number> {
      const row = await knex('tokens').count<{ count: number }[]>({ count: '*' }).first()
      return Number(row?.count ?? 0)
    },
  }
}

export type TokensRepository = ReturnType<typeof tokensRepository>
