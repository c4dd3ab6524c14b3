import type { Knex } from 'knex'

export interface ApplicationKeyRecord {
  id: string
  tenant_id: string
  application_id: string
  key_hash: string
  created_by: string | null
  created_at: Date
}

/** The extra keys of Applications (the Application's own key stays in `applications.key_hash`). */
export function applicationKeysRepository(knex: Knex) {
  const table = (trx: Knex = knex) => trx<ApplicationKeyRecord>('application_keys')
  const of = (tenantId: string, applicationId: string, trx: Knex = knex) => table(trx).where({ tenant_id: tenantId, application_id: applicationId })

  return {
    /**
     * Inserts unless the Application already holds `max` extra keys; false then. The Application's
     * row is locked first, so two concurrent creates can't both pass the count.
     */
    /**
     * Inserts `key` unless its Application holds `max` keys already, in `trx`, which must hold
     * the Application's row lock (applications.lock): concurrent inserts count one after another.
     */
    async insertBounded(key: ApplicationKeyRecord, max: number, trx: Knex): Promise<boolean> {
      const row = await of(key.tenant_id, key.application_id, trx).count<{ count: number }[]>({ count: '*' }).first()
      if (Number(row?.count ?? 0) >= max) return false
      await table(trx).insert(key)
      return true
    },
    list(tenantId: string, applicationId: string): Promise<ApplicationKeyRecord[]> {
      return of(tenantId, applicationId).orderBy([{ column: 'created_at' }, { column: 'id' }])
    },
    async findById(tenantId: string, applicationId: string, id: string): Promise<ApplicationKeyRecord | undefined> {
      return of(tenantId, applicationId).where({ id }).first()
    },
    /** Deletes and returns the deleted key's hash (so caches can drop it). */
    async delete(tenantId: string, applicationId: string, id: string, trx: Knex = knex): Promise<string | undefined> {
      const [row] = await of(tenantId, applicationId, trx).where({ id }).delete().returning(['key_hash'])
      return (row as { key_hash: string } | undefined)?.key_hash
    },
    async hashesOf(tenantId: string, applicationId: string, trx: Knex = knex): Promise<string[]> {
      const rows = await of(tenantId, applicationId, trx).select('key_hash')
      return (rows as { key_hash: string }[]).map((r) => r.key_hash)
    },
    async findByKeyHash(keyHash: string, trx: Knex = knex): Promise<ApplicationKeyRecord | undefined> {
      return table(trx).where({ key_hash: keyHash }).first()
    },
  }
}

export type ApplicationKeysRepository = ReturnType<typeof applicationKeysRepository>
