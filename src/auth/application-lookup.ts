import type { Store } from '../store/index.js'
import type { PrincipalLookup } from './principal.js'

/** Finds the Application that owns a key hash. */
export function applicationLookup(store: Store): PrincipalLookup {
  return async (keyHash) => {
    const app = await store.applications.findByKeyHash(keyHash)
    if (!app) return undefined
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
}
