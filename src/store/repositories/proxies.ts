import type { Knex } from 'knex'
import { ownedRows } from './owned-rows.js'

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
  /** The Application whose key last saved the binding: the code acts within its current grants (null: not bounded). */
  bound_by: string | null
  require_auth: boolean
  created_by: string | null
  created_at: Date
  modified_by: string | null
  modified_at: Date
}

export type ProxyPatch = Partial<Omit<ProxyRecord, 'id' | 'tenant_id' | 'key_hash' | 'created_by' | 'created_at'>>

export function proxiesRepository(knex: Knex) {
  const rows = ownedRows<ProxyRecord>(knex, 'proxies', ['configuration'])
  return {
    ...rows,
    /** Any tenant's: the key alone names the proxy. */
    async findByKeyHash(keyHash: string): Promise<ProxyRecord | undefined> {
      return knex<ProxyRecord>('proxies').where({ key_hash: keyHash }).first()
    },
    update: (tenantId: string, id: string, patch: ProxyPatch) => rows.update(tenantId, id, patch),
  }
}

export type ProxiesRepository = ReturnType<typeof proxiesRepository>
