import type { Knex } from 'knex'
import { pageOf, type Page } from './page.js'

/**
 * The rows of a table that belong to one tenant, by `(tenant_id, id)`: insert, find, a page in
 * creation order, patch, delete. `json` names the columns stored as JSON text; another tenant's
 * row reads as missing.
 */
export function ownedRows<R extends { id: string; tenant_id: string }>(knex: Knex, tableName: string, json: readonly (keyof R & string)[]) {
  const table = () => knex<R>(tableName)
  const own = (tenantId: string, id: string) => table().where({ tenant_id: tenantId, id } as Partial<R>)

  function encode(values: Partial<R>): Record<string, unknown> {
    const out: Record<string, unknown> = { ...values }
    for (const column of json) if (out[column] !== undefined) out[column] = JSON.stringify(out[column])
    return out
  }

  return {
    async insert(row: R): Promise<void> {
      await table().insert(encode(row) as never)
    },
    async findById(tenantId: string, id: string): Promise<R | undefined> {
      return (await own(tenantId, id).first()) as R | undefined
    },
    list(tenantId: string, page: number, size: number): Promise<Page<R>> {
      return pageOf<R>(table().where({ tenant_id: tenantId } as Partial<R>), page, size)
    },
    async update(tenantId: string, id: string, patch: Partial<R>): Promise<R | undefined> {
      const [row] = await own(tenantId, id).update(encode(patch) as never).returning('*')
      return row as R | undefined
    },
    async delete(tenantId: string, id: string): Promise<boolean> {
      const rows = await own(tenantId, id).delete().returning(['id'])
      return rows.length > 0
    },
  }
}
