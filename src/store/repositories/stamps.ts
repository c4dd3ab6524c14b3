import { randomUUID } from 'node:crypto'

/** Whose change it is: the principal's id, or null for the service itself (a tenant's first Application). */
export interface Author {
  id: string | null
  tenantId: string
}

/** The fields every record of a tenant starts with: a new id, its tenant, who made it and when. */
export interface RecordStamp {
  id: string
  tenant_id: string
  created_by: string | null
  created_at: Date
  modified_by: string | null
  modified_at: Date
}

/** A new record's stamp: made, and so last modified, by `by` at `at`. */
export function newRecordStamp(by: Author, at = new Date()): RecordStamp {
  return { id: randomUUID(), tenant_id: by.tenantId, created_by: by.id, created_at: at, modified_by: by.id, modified_at: at }
}

/** What a change to a record writes besides its own fields. */
export function changeStamp(by: Pick<Author, 'id'>, at = new Date()): Pick<RecordStamp, 'modified_by' | 'modified_at'> {
  return { modified_by: by.id, modified_at: at }
}
