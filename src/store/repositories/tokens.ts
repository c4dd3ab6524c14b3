import type { Knex } from 'knex'
import type { Clock } from '../../clock.js'
import { deleteExpiredRows, EXPIRED_BATCH } from './expired-rows.js'
import { pageOf, type Page } from './page.js'
import { applyFilter, applyScopes, type AccessScope, type TokenFilter } from './token-queries.js'

export type { AccessScope, ScopeMatch, TokenFilter, TokenMark } from './token-queries.js'

export interface TokenRecord {
  tenant_id: string
  id: string
  type: string
  containers: string[]
  metadata: Record<string, string>
  mask: unknown
  fingerprint: string | null
  fingerprint_expression: string | null
  /** Set when an equality test of the fingerprint or of a search index tells more than the mask (`testsBeyondMask`): such tests need `reveal`. */
  fingerprint_beyond_mask: boolean
  search_indexes: string[]
  search_beyond_mask: boolean
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

/** A value a deduplicating create looks for (`findByFingerprints`); `expression` is the one it asked for, or `defaultExpression`. */
export interface WantedFingerprint {
  type: string
  fingerprint: string
  expression: string
  defaultExpression: string
  until: Date | null
}

/** A position in the (created_at, id) order of a tenant's tokens: the last row of the page before. */
export interface TokenPosition {
  createdAt: Date
  id: string
}

const JSON_COLUMNS = ['containers', 'metadata', 'mask', 'search_indexes', 'search_hashes'] as const

function serialize(row: Partial<TokenRecord>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...row }
  for (const col of JSON_COLUMNS) if (col in row) out[col] = row[col] === null ? null : JSON.stringify(row[col])
  for (const col of ['encrypted_key', 'ciphertext'] as const) if (row[col]) out[col] = Buffer.from(row[col])
  return out
}

const INSERT_CHUNK = 1000

/** `now` decides which tokens have expired: the service's clock, the one every expiry decision reads. */
export function tokensRepository(knex: Knex, now: Clock) {
  const live = (trx: Knex = knex) =>
    trx<TokenRecord>('tokens').where((q) => q.whereNull('expires_at').orWhere('expires_at', '>', new Date(now())))

  /**
   * `insert` for many rows with distinct ids, a statement per thousand (a whole /tokenize call,
   * instead of a round trip per token): `taken` when a live token holds any of their ids (the
   * caller's transaction then rolls back), otherwise the ids that took expired tokens' rows.
   */
  async function insertMany(rows: readonly TokenRecord[], trx: Knex): Promise<{ replaced: string[] } | 'taken'> {
    const replaced: string[] = []
    for (let i = 0; i < rows.length; i += INSERT_CHUNK) {
      const chunk = rows.slice(i, i + INSERT_CHUNK)
      // xmax is zero on a row this statement inserted and set on one its conflict clause updated.
      const stored: { id: string; replaced: boolean }[] = await trx('tokens')
        .insert(chunk.map(serialize))
        .onConflict(['tenant_id', 'id'])
        .merge()
        .where('tokens.expires_at', '<=', new Date(now()))
        .returning(['id', knex.raw("xmax::text <> '0' as replaced")] as unknown as string[])
      if (stored.length < chunk.length) return 'taken'
      for (const row of stored) if (row.replaced) replaced.push(row.id)
    }
    return { replaced }
  }

  return {
    /**
     * Stores a new token: `taken` when a live token has its id. An expired one does not hold it:
     * every reader already treats it as gone, and the id was a 409 until the sweep removed it.
     * `replaced` says the new token took an expired one's row, whose entries in other
     * processes' caches must go (their clocks may not have reached its expiry yet).
     */
    async insert(row: TokenRecord, trx: Knex = knex): Promise<'inserted' | 'replaced' | 'taken'> {
      const stored = await insertMany([row], trx)
      return stored === 'taken' ? 'taken' : stored.replaced.length ? 'replaced' : 'inserted'
    },
    insertMany,
    /** Whether this very row was stored: its wrapped data key is random, so no other row has it. */
    async stored(row: TokenRecord): Promise<boolean> {
      return (await knex('tokens').where({ tenant_id: row.tenant_id, id: row.id, encrypted_key: Buffer.from(row.encrypted_key) }).first(knex.raw('1 as found'))) !== undefined
    },
    async findById(tenantId: string, id: string): Promise<TokenRecord | undefined> {
      return live().where({ tenant_id: tenantId, id }).first()
    },
    /** The live token, its row locked until `trx` ends: read-modify-writes of one token run one after another. */
    async findForUpdate(tenantId: string, id: string, trx: Knex.Transaction): Promise<TokenRecord | undefined> {
      return live(trx).where({ tenant_id: tenantId, id }).forUpdate().first()
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
    /**
     * For each wanted value (the answer is aligned with `wanted`), in one query: the oldest live
     * token `scopes` admit with its type and fingerprint, made by the same effective expression,
     * that lives at least until `until` (null: never expires). A fingerprint hashes what the
     * token's own expression renders, which another expression may render from other data; a
     * token that expires sooner than asked would vanish early.
     */
    async findByFingerprints(tenantId: string, wanted: readonly WantedFingerprint[], scopes: readonly AccessScope[], trx: Knex = knex): Promise<(TokenRecord | undefined)[]> {
      if (wanted.length === 0) return []
      const values = wanted.map(() => '(?::int, ?::text, ?::text, ?::text, ?::text, ?::timestamptz)').join(', ')
      const bindings = wanted.flatMap((w, i) => [i, w.type, w.fingerprint, w.expression, w.defaultExpression, w.until])
      // A token stored without an expression was fingerprinted with its type's default one.
      const q = live(trx)
        .joinRaw(
          `join (values ${values}) as w(w_index, w_type, w_fingerprint, w_expression, w_default, w_until)
            on tokens.type = w.w_type and tokens.fingerprint = w.w_fingerprint
           and coalesce(tokens.fingerprint_expression, w.w_default) = w.w_expression
           and (tokens.expires_at is null or tokens.expires_at >= w.w_until)`,
          bindings,
        )
        .where('tokens.tenant_id', tenantId)
      applyScopes(q, scopes)
      const rows: (TokenRecord & { w_index: number })[] = await q
        .distinctOn(['w.w_index'])
        .select('tokens.*', 'w.w_index')
        .orderBy([{ column: 'w.w_index' }, { column: 'tokens.created_at' }, { column: 'tokens.id' }])
      const found: (TokenRecord | undefined)[] = wanted.map(() => undefined)
      for (const { w_index: index, ...row } of rows) found[index] = row
      return found
    },
    /**
     * Takes, until `trx` ends, a lock per (type, fingerprint) of the tenant, in one order so two
     * calls cannot wait on each other: deduplicating creates of one value then run one after the
     * other from their look-up to their commit. The lock is advisory (a 64-bit hash of the three),
     * so an unrelated value may share one and wait: never a wrong answer.
     */
    async lockFingerprints(tenantId: string, pairs: readonly (readonly [type: string, fingerprint: string])[], trx: Knex): Promise<void> {
      const keys = [...new Set(pairs.map(([type, fingerprint]) => `${tenantId}:${type}:${fingerprint}`))].sort()
      if (keys.length === 0) return
      await trx.raw('select pg_advisory_xact_lock(hashtextextended(k, 0)) from unnest(?::text[]) as k', [keys])
    },
    async list(tenantId: string, filter: TokenFilter, scopes: readonly AccessScope[], page: number, size: number): Promise<Page<TokenRecord>> {
      const base = live().where({ tenant_id: tenantId })
      applyFilter(base, filter)
      applyScopes(base, scopes)
      return pageOf<TokenRecord>(base, page, size)
    },
    /**
     * Keyset page: up to `limit` rows after `after` in (created_at, id) order, without a count, so
     * a page costs the same however deep it is and rows inserted meanwhile neither repeat nor skip.
     */
    async listAfter(tenantId: string, filter: TokenFilter, scopes: readonly AccessScope[], after: TokenPosition | undefined, limit: number): Promise<TokenRecord[]> {
      const q = live().where({ tenant_id: tenantId })
      applyFilter(q, filter)
      applyScopes(q, scopes)
      if (after) void q.whereRaw('(created_at, id) > (?, ?)', [after.createdAt, after.id])
      return q.orderBy([{ column: 'created_at' }, { column: 'id' }]).limit(limit)
    },
    async update(tenantId: string, id: string, patch: Partial<TokenRecord>, trx: Knex = knex): Promise<TokenRecord | undefined> {
      const [row] = await trx<TokenRecord>('tokens').where({ tenant_id: tenantId, id }).update(serialize(patch)).returning('*')
      return row as TokenRecord | undefined
    },
    async delete(tenantId: string, id: string, trx: Knex = knex): Promise<boolean> {
      // returning() rather than the affected-row count, which the PGlite dialect does not report.
      const rows = await live(trx).where({ tenant_id: tenantId, id }).delete().returning(['id'])
      return rows.length > 0
    },
    async deleteExpired(now: Date, batch = EXPIRED_BATCH): Promise<number> {
      let deleted = 0
      for await (const rows of deleteExpiredRows(knex, 'tokens', ['tenant_id', 'id'], (q) => q.where('expires_at', '<=', now), ['id'], batch)) deleted += rows.length
      return deleted
    },
    /**
     * A batch of rows still wrapped under a key other than `keyId`, in (tenant_id, id) order after
     * `after`, for resumable re-wrapping: a row that cannot be re-wrapped is passed, not met again
     * at the head of every batch.
     */
    async findWrappedNotUnder(keyId: string, limit: number, after?: { tenant_id: string; id: string }): Promise<Pick<TokenRecord, 'tenant_id' | 'id' | 'key_id' | 'encrypted_key'>[]> {
      const query = knex<TokenRecord>('tokens').whereNot('key_id', keyId)
      if (after) query.whereRaw('(tenant_id, id) > (?::uuid, ?)', [after.tenant_id, after.id])
      return query.select('tenant_id', 'id', 'key_id', 'encrypted_key').orderBy([{ column: 'tenant_id' }, { column: 'id' }]).limit(limit)
    },
    async countWrappedNotUnder(keyId: string): Promise<number> {
      const row = await knex('tokens').whereNot('key_id', keyId).count<{ count: number }[]>({ count: '*' }).first()
      return Number(row?.count ?? 0)
    },
    /**
     * Swaps the wrapping only if the row still holds the exact wrapping that was read (the server
     * keeps running during a rewrap). Matching the key id alone is not enough: an update by a
     * server whose primary key is still the old one writes a new data key under the same id, and
     * the old data key put over its new ciphertext would make the token unreadable for good.
     */
    async replaceWrapping(row: { tenant_id: string; id: string; key_id: string; encrypted_key: Uint8Array }, next: { key_id: string; encrypted_key: Uint8Array }): Promise<boolean> {
      const rows = await knex('tokens')
        .where({ tenant_id: row.tenant_id, id: row.id, key_id: row.key_id, encrypted_key: Buffer.from(row.encrypted_key) })
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
