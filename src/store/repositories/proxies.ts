import type { Knex } from 'knex'
import type { Page } from './applications.js'

export interface ProxyRecord {
  id: string
  tenant_id: string
  name: string
  key_hash: string
  destination_url: string
  request_transform_code: string | null
  response_transform_code: string | null
  version: string
  configuration: Record<string, string>
  application_id: string | null
  require_auth: boolean
  created_by: string | null
  created_at: Date
  modified_by: string | null
  modified_at: Date
}

export type ProxyPatch = Partial<Omit<ProxyRecord, 'id' | 'tenant_id' | 'key_hash' | 'created_by' | 'created_at'>>

export function proxiesRepository(knex: Knex) {
  const table = () => knex<ProxyRecord>('proxies')
  return {
    async insert(row: ProxyRecord): Promise<void> {
      await table().insert({ ...row, configuration: JSON.stringify(row.configuration) as never })
    },
    async findById(tenantId: string, id: string): Promise<ProxyRecord | undefined> {
      return table().where({ tenant_id: tenantId, id }).first()
    },
    /** Any tenant's: the key alone names the proxy. */
    async findByKeyHash(keyHash: string): Promise<ProxyRecord | undefined> {
      return table().where({ key_hash: keyHash }).first()
    },
    async list(tenantId: string, page: number, size: number): Promise<Page<ProxyRecord>> {
      const base = table().where({ tenant_id: tenantId })
      const [countRow, items] = await Promise.all([
        base.clone().count<{ count: number }[]>({ count: '*' }).first(),
        base.clone().orderBy([{ column: 'created_at' }, { column: 'id' }]).limit(size).offset((page - 1) * size),
      ])
      return { items, total: Number(countRow?.count ?? 0) }
    },
    async update(tenantId: string, id: string, patch: ProxyPatch): Promise<ProxyRecord | undefined> {
      const values: Record<string, unknown> = { ...patch }
      if (patch.configuration) values.configuration = JSON.stringify(patch.configuration)
      const [row] = await table().where({ tenant_id: tenantId, id }).update(values).returning('*')
      return row as ProxyRecord | undefined
    },
    async delete(tenantId: string, id: string): Promise<boolean> {
      const rows = await table().where({ tenant_id: tenantId, id }).delete().returning(['id'])
      return rows.length > 0
    },
  }
}

export type ProxiesRepository = ReturnType<typeof proxiesRepository>
