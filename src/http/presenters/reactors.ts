import type { ReactResult } from '../../reactors/service.js'
import type { ReactorRecord } from '../../store/index.js'
import type { ReactorResponse } from '../schemas/reactors.js'
import { compact, iso } from './common.js'

export function presentReactor(r: ReactorRecord): ReactorResponse {
  return compact({
    id: r.id,
    tenant_id: r.tenant_id,
    name: r.name,
    code: r.code,
    configuration: r.configuration,
    application: r.application_id ? { id: r.application_id } : undefined,
    created_by: r.created_by ?? undefined,
    created_at: iso(r.created_at),
    modified_by: r.modified_by ?? undefined,
    modified_at: iso(r.modified_at),
  })
}

/** What `react` answers when the Reactor returned a value (not a custom response): parts it did not return are omitted. */
export function presentReactResult({ body }: Extract<ReactResult, { kind: 'result' }>) {
  return compact(body)
}
