import type { Knex } from 'knex'

export interface TenantSettings {
  ephemeral_proxy_enabled: boolean
}

export interface Tenant {
  id: string
  name: string
  settings: TenantSettings
  created_at: Date
  modified_at: Date
}

export const defaultTenantSettings: TenantSettings = { ephemeral_proxy_enabled: true }

export function tenantsRepository(knex: Knex) {
  const table = () => knex<Tenant>('tenants')
  const withDefaults = (row: Tenant | undefined): Tenant | undefined =>
    row && { ...row, settings: { ...defaultTenantSettings, ...row.settings } }

  return {
    async insert(tenant: Tenant, trx: Knex = knex): Promise<void> {
      await trx<Tenant>('tenants').insert({ ...tenant, settings: JSON.stringify(tenant.settings) as never })
    },
    async findById(id: string): Promise<Tenant | undefined> {
      return withDefaults(await table().where({ id }).first())
    },
    async count(): Promise<number> {
      const row = await table().count<{ count: number }[]>({ count: '*' }).first()
      return Number(row?.count ?? 0)
    },
    async updateSettings(id: string, settings: TenantSettings, modifiedAt: Date): Promise<Tenant | undefined> {
      const [row] = await table()
        .where({ id })
        .update({ settings: JSON.stringify(settings) as never, modified_at: modifiedAt })
        .returning('*')
      return withDefaults(row as Tenant | undefined)
    },
    /** Removes a tenant; every row of it goes too (foreign keys cascade), its audit entries stay. */
    async delete(id: string, trx: Knex = knex): Promise<boolean> {
      return (await trx<Tenant>('tenants').where({ id }).delete()) > 0
    },
  }
}

export type TenantsRepository = ReturnType<typeof tenantsRepository>
