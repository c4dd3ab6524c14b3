import type { ApplicationKeyRecord } from '../../store/index.js'
import type { ApplicationKeyResponse } from '../schemas/application-keys.js'
import { compact, iso } from './common.js'

/** The only way an Application key leaves the service: never its hash; the key only when just created. */
export function presentApplicationKey(record: ApplicationKeyRecord, key?: string): ApplicationKeyResponse {
  return compact({
    id: record.id,
    tenant_id: record.tenant_id,
    application_id: record.application_id,
    key,
    created_by: record.created_by ?? undefined,
    created_at: iso(record.created_at)!,
  })
}
