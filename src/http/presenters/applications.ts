import type { ApplicationRecord } from '../../store/index.js'
import type { ApplicationResponse } from '../schemas/applications.js'
import { compact, iso } from './common.js'

/** The only way an Application leaves the service: never its key hash; its key only when just issued. */
export function presentApplication(app: ApplicationRecord, key?: string): ApplicationResponse {
  return compact({
    id: app.id,
    tenant_id: app.tenant_id,
    name: app.name,
    key,
    type: app.type,
    permissions: app.permissions,
    rules: app.rules,
    created_by: app.created_by ?? undefined,
    created_at: iso(app.created_at)!,
    modified_by: app.modified_by ?? undefined,
    modified_at: iso(app.modified_at)!,
    expires_at: iso(app.expires_at),
  })
}
