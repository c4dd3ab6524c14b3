import type { ApplicationRecord, Store, StoreTransaction } from '../store/index.js'
import type { Principal, PrincipalLookup } from './principal.js'

/** An Application as the principal it acts as, through one of its keys (its own by default). */
export function applicationPrincipal(app: ApplicationRecord, keyHash = app.key_hash): Principal {
  return {
    kind: 'application',
    id: app.id,
    tenantId: app.tenant_id,
    type: app.type,
    permissions: app.permissions,
    rules: app.rules,
    expiresAt: app.expires_at ? new Date(app.expires_at) : null,
    keyHash,
  }
}

/** Whether `keyHash` is still a live key of `app`: its own, or one of its extra keys (read in `trx` when given). */
export async function holdsKey(store: Store, app: ApplicationRecord, keyHash: string | null, trx?: StoreTransaction): Promise<boolean> {
  if (keyHash === null) return false
  if (app.key_hash === keyHash) return true
  return (await store.applicationKeys.findByKeyHash(keyHash, trx))?.application_id === app.id
}

/** Finds the Application that owns a key hash: its own key, or one of its extra keys. */
export function applicationLookup(store: Store): PrincipalLookup {
  return async (keyHash) => {
    const app = await store.applications.findByKeyHash(keyHash)
    return app ? applicationPrincipal(app, keyHash) : undefined
  }
}
