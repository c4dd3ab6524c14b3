import type { ProxyRecord } from '../../store/index.js'
import type { ProxyResponse } from '../schemas/proxies.js'
import { compact, iso } from './common.js'

/** Never the key hash; the key itself only when just created (`key`). */
export function presentProxy(p: ProxyRecord, key?: string): ProxyResponse {
  return compact({
    id: p.id,
    key,
    tenant_id: p.tenant_id,
    name: p.name,
    destination_url: p.destination_url,
    request_transform: p.request_transform_code === null ? undefined : { code: p.request_transform_code },
    response_transform: p.response_transform_code === null ? undefined : { code: p.response_transform_code },
    configuration: p.configuration,
    application: p.application_id ? { id: p.application_id } : undefined,
    require_auth: p.require_auth,
    created_by: p.created_by ?? undefined,
    created_at: iso(p.created_at),
    modified_by: p.modified_by ?? undefined,
    modified_at: iso(p.modified_at),
  })
}
