import type { ApplicationRecord, Store } from '../store/index.js'
import type { Principal, PrincipalLookup } from './principal.js'

/** An Application as the principal it acts as. */
export function applicationPrincipal(app: ApplicationRecord): Principal {
  return {
    kind: 'application',
    id: app.id,
    tenantId: app.tenant_id,
    type: app.type,
    permissions: app.permissions,
    rules: app.rules,
    expiresAt: app.expires_at ? new Date(app.expires_at) : null,
    keyHash: app.key_hash,
  }
}

/** Finds the Application that owns a key hash. */
export function applicationLookup(store: Store): PrincipalLookup {
  return async (keyHash) => {
    const app = await store.applications.findByKeyHash(keyHash)
    return app ? applicationPrincipal(app) : undefined
  }
}
