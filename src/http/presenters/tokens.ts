import { showsFingerprint } from '../../auth/policies.js'
import type { TokenView } from '../../vault/token-service.js'
import type { TokenResponse, UpdatedTokenName } from '../schemas/tokens.js'
import { compact, iso } from './common.js'

/**
 * The only way a token leaves the service: ciphertext, keys and search hashes never do; `data`
 * only as transformed; the fingerprint (an equality test of the data) as `showsFingerprint` allows.
 */
export function presentToken({ record, data, transform }: TokenView): TokenResponse {
  return compact({
    id: record.id,
    tenant_id: record.tenant_id,
    type: record.type as TokenResponse['type'],
    data,
    mask: record.mask ?? undefined,
    containers: record.containers,
    metadata: record.metadata,
    fingerprint: showsFingerprint(transform, record) ? (record.fingerprint ?? undefined) : undefined,
    fingerprint_expression: record.fingerprint_expression ?? undefined,
    search_indexes: record.search_indexes,
    expires_at: iso(record.expires_at),
    created_by: record.created_by ?? undefined,
    created_at: iso(record.created_at),
    modified_by: record.modified_by ?? undefined,
    modified_at: iso(record.modified_at),
  })
}

/** A PATCH answer: the token as above, or only its name for a key that may update but not read it. */
export function presentUpdatedToken(view: TokenView): TokenResponse | UpdatedTokenName {
  if (!view.unreadable) return presentToken(view)
  const { record } = view
  return compact({ id: record.id, tenant_id: record.tenant_id, type: record.type as TokenResponse['type'], modified_at: iso(record.modified_at) })
}
