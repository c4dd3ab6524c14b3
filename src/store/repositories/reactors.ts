import type { Knex } from 'knex'
import { ownedRows } from './owned-rows.js'

export interface ReactorRecord {
  id: string
  tenant_id: string
  name: string
  code: string
  version: string
  configuration: Record<string, string>
  application_id: string | null
  /** The Application whose key last saved the binding: the code acts within its current grants (null: not bounded). */
  bound_by: string | null
  created_by: string | null
  created_at: Date
  modified_by: string | null
  modified_at: Date
}

export function reactorsRepository(knex: Knex) {
  return ownedRows<ReactorRecord>(knex, 'reactors', ['configuration'])
}

export type ReactorsRepository = ReturnType<typeof reactorsRepository>
