import type { Tenant } from '../../store/index.js'
import type { TenantResponse } from '../schemas/tenants.js'
import { iso } from './common.js'

export function presentTenant(tenant: Tenant): TenantResponse {
  return {
    id: tenant.id,
    name: tenant.name,
    settings: tenant.settings,
    created_at: iso(tenant.created_at),
    modified_at: iso(tenant.modified_at),
  }
}
