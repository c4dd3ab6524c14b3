import type { Knex } from 'knex'
import { pageOf, type Page } from './page.js'
import { deleteExpiredRows, EXPIRED_BATCH } from './expired-rows.js'
import type { AccessRuleRecord } from './types.js'

export type ApplicationType = 'private' | 'public' | 'management'

export interface ApplicationRecord {
  id: string
  tenant_id: string
  name: string
  type: ApplicationType
  key_hash: string
  permissions: string[]
  rules: AccessRuleRecord[]
  created_by: string | null
  created_at: Date
  modified_by: string | null
  modified_at: Date
  expires_at: Date | null
  /** When its grants were last narrowed (public Applications only; see sessions' authorization). */
  grants_narrowed_at?: Date | null
}

export interface ApplicationFilter {
  ids: string[]
  types: string[]
}

const json = (v: unknown) => JSON.stringify(v) as never

export function applicationsRepository(knex: Knex) {
  const table = (trx: Knex = knex) => trx<ApplicationRecord>('applications')

  return {
    async insert(app: ApplicationRecord, trx: Knex = knex): Promise<void> {
      await table(trx).insert({ ...app, permissions: json(app.permissions), rules: json(app.rules) })
    },
    /** Whether this very Application was stored: its key hash is of a fresh random key. */
    async stored(app: ApplicationRecord): Promise<boolean> {
      return (await table().where({ tenant_id: app.tenant_id, id: app.id, key_hash: app.key_hash }).first(knex.raw('1 as found'))) !== undefined
    },
    async findById(tenantId: string, id: string): Promise<ApplicationRecord | undefined> {
      return table().where({ tenant_id: tenantId, id }).first()
    },
    /** The Application holding a key: its own (`key_hash`) or one of its extra keys; one query either way. */
    async findByKeyHash(keyHash: string): Promise<ApplicationRecord | undefined> {
      return table()
        .where({ key_hash: keyHash })
        .orWhereIn('id', knex('application_keys').select('application_id').where({ key_hash: keyHash }))
        .first()
    },
    async list(tenantId: string, filter: ApplicationFilter, page: number, size: number): Promise<Page<ApplicationRecord>> {
      const base = table().where({ tenant_id: tenantId })
      if (filter.ids.length) void base.whereIn('id', filter.ids)
      if (filter.types.length) void base.whereIn('type', filter.types)
      return pageOf<ApplicationRecord>(base, page, size)
    },
    /**
     * Changes the Application under its row lock. `authorize` sees the row as locked (the one
     * the write replaces) and throws to refuse: a decision on a row read earlier could let a
     * narrow key weaken an Application widened meanwhile.
     */
    async update(
      tenantId: string,
      id: string,
      patch: Partial<Pick<ApplicationRecord, 'name' | 'permissions' | 'rules' | 'key_hash' | 'modified_by' | 'modified_at' | 'grants_narrowed_at'>>,
      outer: Knex = knex,
      authorize: (current: ApplicationRecord) => void = () => undefined,
    ): Promise<{ updated: ApplicationRecord; previous: ApplicationRecord; previousKeyHash: string } | undefined> {
      return outer.transaction(async (trx) => {
        const current = await table(trx).where({ tenant_id: tenantId, id }).forUpdate().first()
        if (!current) return undefined
        authorize(current)
        const values: Record<string, unknown> = { ...patch }
        if (patch.permissions) values.permissions = json(patch.permissions)
        if (patch.rules) values.rules = json(patch.rules)
        const [updated] = await table(trx).where({ tenant_id: tenantId, id }).update(values).returning('*')
        return updated ? { updated: updated as ApplicationRecord, previous: current, previousKeyHash: current.key_hash } : undefined
      })
    },
    /**
     * Locks the Application's row until `trx` ends and returns it as locked (what a decision
     * about changing it must read); undefined when there is none. Every transaction that changes
     * an Application's keys or sessions takes this lock first (update does), so concurrent
     * deletes, key deletes and regenerations queue instead of deadlocking.
     */
    async lock(tenantId: string, id: string, trx: Knex): Promise<ApplicationRecord | undefined> {
      return table(trx).where({ tenant_id: tenantId, id }).forUpdate().first()
    },
    /** Deletes and returns the deleted row's key hash (so caches can drop it). */
    async delete(tenantId: string, id: string, trx: Knex = knex): Promise<string | undefined> {
      const [row] = await table(trx).where({ tenant_id: tenantId, id }).delete().returning(['key_hash'])
      return (row as { key_hash: string } | undefined)?.key_hash
    },
    /** Removes expired Applications (their extra keys with them); returns how many. */
    async deleteExpired(now: Date, batch = EXPIRED_BATCH): Promise<number> {
      let deleted = 0
      for await (const rows of deleteExpiredRows(knex, 'applications', ['id'], (q) => q.where('expires_at', '<=', now), ['id'], batch)) deleted += rows.length
      return deleted
    },
  }
}

export type ApplicationsRepository = ReturnType<typeof applicationsRepository>
