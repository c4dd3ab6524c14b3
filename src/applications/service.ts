import { randomUUID } from 'node:crypto'
import { generateApiKey, type KeyHasher } from '../auth/api-keys.js'
import type { Authenticator } from '../auth/authenticator.js'
import { validateRules } from '../auth/access-rules.js'
import { isKnownPermission, mayHold } from '../auth/permissions.js'
import type { Principal } from '../auth/principal.js'
import { AppError, ValidationError, type FieldErrors } from '../errors/index.js'
import type { AccessRuleRecord, ApplicationFilter, ApplicationRecord, ApplicationType, Page, Store } from '../store/index.js'

export interface ApplicationsDeps {
  store: Store
  hasher: KeyHasher
  authenticator: Authenticator
}

export interface ApplicationInput {
  name: string
  type: ApplicationType
  permissions?: string[]
  rules?: AccessRuleRecord[]
  expires_at?: string | null
}

export interface ApplicationUpdate {
  name: string
  permissions?: string[]
  rules?: AccessRuleRecord[]
}

export interface WithKey {
  application: ApplicationRecord
  key: string
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

export function applicationsService(deps: ApplicationsDeps) {
  const { store, hasher, authenticator } = deps

  async function find(tenantId: string, id: string): Promise<ApplicationRecord> {
    const app = UUID.test(id) ? await store.applications.findById(tenantId, id) : undefined
    if (!app) throw new AppError('not_found', { detail: 'No Application with this id.' })
    return app
  }

  return {
    async createApplication(caller: Principal, input: ApplicationInput): Promise<WithKey> {
      const permissions = input.permissions ?? []
      const rules = input.rules ?? []
      const errors = validateGrants(input.type, permissions, rules)
      const expiresAt = input.expires_at ? new Date(input.expires_at) : null
      if (expiresAt && expiresAt.getTime() <= Date.now()) (errors.expires_at ??= []).push('must be in the future')
      if (Object.keys(errors).length) throw new ValidationError(errors)
      const key = generateApiKey()
      const now = new Date()
      const application: ApplicationRecord = {
        id: randomUUID(),
        tenant_id: caller.tenantId,
        name: input.name,
        type: input.type,
        key_hash: hasher.hash(key),
        permissions,
        rules,
        created_by: caller.id,
        created_at: now,
        modified_by: caller.id,
        modified_at: now,
        expires_at: expiresAt,
      }
      await store.applications.insert(application)
      return { application, key }
    },

    getApplication: (tenantId: string, id: string) => find(tenantId, id),

    listApplications(tenantId: string, filter: ApplicationFilter, page: number, size: number): Promise<Page<ApplicationRecord>> {
      return store.applications.list(tenantId, filter, page, size)
    },

    async updateApplication(caller: Principal, id: string, input: ApplicationUpdate): Promise<ApplicationRecord> {
      const current = await find(caller.tenantId, id)
      const permissions = input.permissions ?? []
      const rules = input.rules ?? []
      const errors = validateGrants(current.type, permissions, rules)
      if (input.permissions && input.permissions.length === 0) (errors.permissions ??= []).push('must not be empty when given')
      if (Object.keys(errors).length) throw new ValidationError(errors)
      const result = await store.applications.update(caller.tenantId, id, {
        name: input.name,
        permissions,
        rules,
        modified_by: caller.id,
        modified_at: new Date(),
      })
      if (!result) throw new AppError('not_found', { detail: 'No Application with this id.' })
      // Cached principals carry the old grants.
      await authenticator.invalidateKey(result.updated.key_hash)
      return result.updated
    },

    async regenerateKey(caller: Principal, id: string): Promise<WithKey> {
      await find(caller.tenantId, id)
      const key = generateApiKey()
      const result = await store.applications.update(caller.tenantId, id, {
        key_hash: hasher.hash(key),
        modified_by: caller.id,
        modified_at: new Date(),
      })
      if (!result) throw new AppError('not_found', { detail: 'No Application with this id.' })
      await authenticator.invalidateKey(result.previousKeyHash)
      return { application: result.updated, key }
    },

    async deleteApplication(caller: Principal, id: string): Promise<void> {
      const keyHash = UUID.test(id) ? await store.applications.delete(caller.tenantId, id) : undefined
      if (!keyHash) throw new AppError('not_found', { detail: 'No Application with this id.' })
      await authenticator.invalidateKey(keyHash)
    },

    /** Deletes Applications past `expires_at` (they already fail authentication from that instant). */
    async sweepExpired(now = new Date()): Promise<number> {
      const hashes = await store.applications.deleteExpired(now)
      for (const hash of hashes) await authenticator.invalidateKey(hash)
      return hashes.length
    },
  }
}

export type ApplicationsService = ReturnType<typeof applicationsService>

/** The grant rules shared by create and update: known permissions, allowed for the type, at least one grant. */
function validateGrants(type: ApplicationType, permissions: string[], rules: AccessRuleRecord[]): FieldErrors {
  const errors: FieldErrors = {}
  permissions.forEach((p, i) => {
    if (!isKnownPermission(p)) (errors[`permissions[${i}]`] ??= []).push(`unknown permission '${p}'`)
    else if (!mayHold(type, p)) (errors[`permissions[${i}]`] ??= []).push(`a ${type} Application may not hold '${p}'`)
  })
  Object.assign(errors, validateRules(rules, type))
  if (permissions.length === 0 && rules.length === 0) (errors.permissions ??= []).push('at least one of permissions and rules must be non-empty')
  return errors
}
