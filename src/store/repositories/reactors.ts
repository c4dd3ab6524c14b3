import type { Knex } from 'knex'
import type { Page } from './applications.js'

export interface ReactorRecord {
  id: string
  tenant_id: string
  name: string
  code: string
  version: string
  configuration: Record<string, string>
  application_id: string | null
  created_by: string | null
  created_at: Date
  modified_by: string | null
  modified_at: Date
}

export function reactorsRepository(knex: Knex) {
  const table = () => knex<ReactorRecord>('reactors')
  return {
    async insert(row: ReactorRecord): Promise<void> {
      await table().insert({ ...row, configuration: JSON.stringify(row.configuration) as never })
    },
    async findById(tenantId: string, id: string): Promise<ReactorRecord | undefined> {
      return table().where({ tenant_id: tenantId, id }).first()
    },
    async list(tenantId: string, page: number, size: number): Promise<Page<ReactorRecord>> {
      const base = table().where({ tenant_id: tenantId })
      const [countRow, items] = await Promise.all([
        base.clone().count<{ count: number }[]>({ count: '*' }).first(),
        base.clone().orderBy([{ column: 'created_at' }, { column: 'id' }]).limit(size).offset((page - 1) * size),
      ])
      return { items, total: Number(countRow?.count ?? 0) }
    },
    async update(tenantId: string, id: string, patch: Partial<ReactorRecord>): Promise<ReactorRecord | undefined> {
      const values: Record<string, unknown> = { ...patch }
      if (patch.configuration) values.configuration = JSON.stringify(patch.configuration)
      const [row] = await table().where({ tenant_id: tenantId, id }).update(values).returning('*')
      return row as ReactorRecord | undefined
    },
    async delete(tenantId: string, id: string): Promise<boolean> {
      const rows = await table().where({ tenant_id: tenantId, id }).delete().returning(['id'])
      return rows.length > 0
    },
  }
}

export type ReactorsRepository = ReturnType<typeof reactorsRepository>
