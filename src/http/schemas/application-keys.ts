import { Type, type Static } from '@sinclair/typebox'
import { DateTime, Uuid } from './common.js'

/**
 * An Application's extra key: the hosted SDK's fields, plus `tenant_id` and `application_id` like
 * every Tessera resource (so an idempotent replay drops `key` as it does for Applications).
 */
export const ApplicationKeyResponse = Type.Object({
  id: Uuid,
  tenant_id: Uuid,
  application_id: Uuid,
  key: Type.Optional(Type.String()),
  created_by: Type.Optional(Uuid),
  created_at: DateTime,
})
export type ApplicationKeyResponse = Static<typeof ApplicationKeyResponse>

/** At most ten keys: one plain array, the shape the hosted SDK expects (no pages). */
export const ApplicationKeyList = Type.Array(ApplicationKeyResponse)
