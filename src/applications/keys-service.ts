import { randomUUID } from 'node:crypto'
import { newApiKey, type ApiKeyHasher } from '../auth/api-keys.js'
import type { Authenticator } from '../auth/authenticator.js'
import { authorizeApplicationChange, authorizeLifetime } from '../auth/policies.js'
import type { Principal } from '../auth/principal.js'
import { AppError } from '../errors/index.js'
import type { ApplicationKeyRecord, ApplicationRecord, Store } from '../store/index.js'
import type { ApplicationsService } from './service.js'
import { isUuid } from '../shapes/ids.js'

/** Extra keys an Application may hold beside its own (the one create and regenerate issue). */
export const MAX_APPLICATION_KEYS = 10

export interface KeyWithSecret {
  record: ApplicationKeyRecord
  key: string
}

/**
 * Several live keys per Application, for rotation without downtime: create a key, move the
 * clients to it, delete the old one. Minting or deleting a key is authorized exactly like
 * regenerate (the caller's grants must cover the Application's), since a key is its grants.
 */
export function applicationKeysService(deps: { store: Store; hasher: ApiKeyHasher; authenticator: Authenticator; applications: ApplicationsService }) {
  const { store, hasher, authenticator, applications } = deps

  const notFound = () => new AppError('not_found', { detail: 'No key with this id on this Application.' })

  return {
    async createKey(caller: Principal, applicationId: string): Promise<KeyWithSecret> {
      const app = await applications.getApplication(caller.tenantId, applicationId)
      const key = newApiKey(app.type)
      const record: ApplicationKeyRecord = { id: randomUUID(), tenant_id: caller.tenantId, application_id: app.id, key_hash: hasher.hash(key), created_by: caller.id, created_at: new Date() }
      const outcome = await store.transaction(async (trx) => {
        // Decided on the row as locked: the key holds its grants from the commit on.
        const current = await store.applications.lock(caller.tenantId, app.id, trx)
        if (!current) return 'gone'
        authorizeChange(caller, current)
        return (await store.applicationKeys.insertBounded(record, MAX_APPLICATION_KEYS, trx)) ? 'created' : 'full'
      })
      // The Application may have been deleted meanwhile: that is a 404, not the cap.
      if (outcome === 'gone') throw new AppError('not_found', { detail: 'No Application with this id.' })
      if (outcome === 'full') throw new AppError('conflict', { detail: `An Application holds at most ${MAX_APPLICATION_KEYS} keys beside its own; delete one first.` })
      return { record, key }
    },

    async listKeys(tenantId: string, applicationId: string): Promise<ApplicationKeyRecord[]> {
      const app = await applications.getApplication(tenantId, applicationId)
      return store.applicationKeys.list(tenantId, app.id)
    },

    async getKey(tenantId: string, applicationId: string, keyId: string): Promise<ApplicationKeyRecord> {
      const app = await applications.getApplication(tenantId, applicationId)
      const record = isUuid(keyId) ? await store.applicationKeys.findById(tenantId, app.id, keyId) : undefined
      if (!record) throw notFound()
      return record
    },

    /** The key stops at once in every process, and so do the sessions created or authorized with it. */
    deleteKey: (caller: Principal, applicationId: string, keyId: string) => authenticator.changing(async () => {
      const app = await applications.getApplication(caller.tenantId, applicationId)
      const deleted = await store.transaction(async (trx) => {
        // The Application's row first, as every change of its keys and sessions locks it; the
        // decision reads the row as locked, not as it was before a concurrent widening.
        const current = await store.applications.lock(caller.tenantId, app.id, trx)
        if (!current) return undefined
        authorizeApplicationChange(caller, current)
        if (!isUuid(keyId)) return undefined
        const keyHash = await store.applicationKeys.delete(caller.tenantId, app.id, keyId, trx)
        return keyHash === undefined ? undefined : { keyHash, sessions: await store.sessions.deleteOfKey(caller.tenantId, keyHash, trx) }
      })
      if (!deleted) throw notFound()
      await authenticator.invalidateKeys([deleted.keyHash, ...deleted.sessions])
    }),
  }
}

export type ApplicationKeysService = ReturnType<typeof applicationKeysService>

/** Minting a key hands out the Application's grants, for as long as the Application lives. */
function authorizeChange(caller: Principal, current: ApplicationRecord): void {
  authorizeApplicationChange(caller, current)
  authorizeLifetime(caller, current.expires_at, { what: 'The new key', field: 'id' })
}
