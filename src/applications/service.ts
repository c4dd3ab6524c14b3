import { newApiKey, type ApiKeyHasher } from '../auth/api-keys.js'
import type { Authenticator } from '../auth/authenticator.js'
import { validateRules } from '../auth/access-rules.js'
import { isKnownPermission, mayHold } from '../auth/permissions.js'
import { authorizeApplicationChange, authorizeGrant, authorizeLifetime, narrows } from '../auth/policies.js'
import type { Principal } from '../auth/principal.js'
import type { Clock } from '../clock.js'
import { AppError, ValidationError, type FieldErrors } from '../errors/index.js'
import { changeStamp, newRecordStamp, type AccessRuleRecord, type ApplicationFilter, type ApplicationRecord, type ApplicationType, type Page, type Store } from '../store/index.js'
import { isUuid } from '../shapes/ids.js'

export interface ApplicationsDeps {
  store: Store
  hasher: ApiKeyHasher
  authenticator: Authenticator
  /** Whether an expiry is in the future, and which Applications the sweep removes. */
  clock: Clock
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

export function applicationsService(deps: ApplicationsDeps) {
  const { store, hasher, authenticator } = deps

  async function find(tenantId: string, id: string): Promise<ApplicationRecord> {
    const app = isUuid(id) ? await store.applications.findById(tenantId, id) : undefined
    if (!app) throw new AppError('not_found', { detail: 'No Application with this id.' })
    return app
  }

  /**
   * Every process drops the Application's key and the keys of the sessions it created or
   * authorized (they reload bounded by its current grants, or end): the same NOTIFY as keys.
   */
  async function invalidate(keyHashes: string | readonly string[], sessionKeyHashes: readonly string[]): Promise<void> {
    await authenticator.invalidateKeys([...(typeof keyHashes === 'string' ? [keyHashes] : keyHashes), ...sessionKeyHashes])
  }

  async function updateApplication(caller: Principal, id: string, input: ApplicationUpdate): Promise<ApplicationRecord> {
    const found = await find(caller.tenantId, id)
    const next = { permissions: input.permissions ?? [], rules: input.rules ?? [] }
    // The type never changes, so the grants are validated before the row is locked.
    const errors = validateGrants(found.type, next.permissions, next.rules)
    if (input.permissions && input.permissions.length === 0) (errors.permissions ??= []).push('must not be empty when given')
    if (Object.keys(errors).length) throw new ValidationError(errors)
    const changed = await store.transaction(async (trx) => {
      const result = await store.applications.update(caller.tenantId, id, { name: input.name, ...next, ...changeStamp(caller) }, trx, (current) => {
        authorizeApplicationChange(caller, current, next)
        // Widening hands out access for as long as the Application lives.
        if (narrows(next, current)) authorizeLifetime(caller, current.expires_at, { what: 'The widened Application', field: 'id' })
      })
      if (!result) return undefined
      // Cached principals carry the old grants, the sessions it authorized the old bound. A
      // session acts within its authorizer's current grants, so narrowing a private Application
      // narrows them; a public creator's grants bound nothing the session does, so narrowing
      // one ends the sessions it vouched for under the wider grant. In the same transaction:
      // a narrowing that committed without its sessions' end would never end them (a retry
      // compares narrow with narrow).
      const ends = result.previous.type === 'public' && narrows(result.previous, next)
      // Its pending sessions are refused from now on (see lockVouchers), by the clock sessions are made by.
      if (ends) await store.applications.update(caller.tenantId, id, { grants_narrowed_at: new Date(deps.clock()) }, trx)
      return {
        updated: result.updated,
        keyHashes: [result.updated.key_hash, ...(await store.applicationKeys.hashesOf(caller.tenantId, id, trx))],
        sessions: ends ? await store.sessions.deleteOf(caller.tenantId, id, trx) : await store.sessions.keyHashesOf(caller.tenantId, id, trx),
      }
    })
    if (!changed) throw new AppError('not_found', { detail: 'No Application with this id.' })
    await invalidate(changed.keyHashes, changed.sessions)
    return changed.updated
  }

  /** A new key ends the sessions the Application created or authorized: they were vouched for by the old one. */
  async function regenerateKey(caller: Principal, id: string): Promise<WithKey> {
    const key = newApiKey((await find(caller.tenantId, id)).type)
    const { result, sessions } = await store.transaction(async (trx) => {
      const authorize = (current: ApplicationRecord) => {
        authorizeApplicationChange(caller, current)
        authorizeLifetime(caller, current.expires_at, { what: 'The new key', field: 'id' })
      }
      const updated = await store.applications.update(caller.tenantId, id, { key_hash: hasher.hash(key), ...changeStamp(caller) }, trx, authorize)
      return { result: updated, sessions: updated ? await store.sessions.deleteOf(caller.tenantId, id, trx) : [] }
    })
    if (!result) throw new AppError('not_found', { detail: 'No Application with this id.' })
    await invalidate(result.previousKeyHash, sessions)
    return { application: result.updated, key }
  }

  async function deleteApplication(caller: Principal, id: string): Promise<void> {
    await find(caller.tenantId, id)
    const deleted = await store.transaction(async (trx) => {
      // The Application's row first, as every change of its keys and sessions locks it; the
      // decision reads the row as locked, not as it was before a concurrent widening.
      const current = await store.applications.lock(caller.tenantId, id, trx)
      if (!current) return undefined
      authorizeApplicationChange(caller, current)
      return {
        sessions: await store.sessions.deleteOf(caller.tenantId, id, trx),
        // Deleted with the Application (foreign key cascade).
        extraKeys: await store.applicationKeys.hashesOf(caller.tenantId, id, trx),
        keyHash: await store.applications.delete(caller.tenantId, id, trx),
      }
    })
    const { keyHash, extraKeys = [], sessions = [] } = deleted ?? {}
    if (!keyHash) throw new AppError('not_found', { detail: 'No Application with this id.' })
    await invalidate([keyHash, ...extraKeys], sessions)
  }

  return {
    async createApplication(caller: Principal, input: ApplicationInput): Promise<WithKey> {
      const permissions = input.permissions ?? []
      const rules = input.rules ?? []
      const errors = validateGrants(input.type, permissions, rules)
      const expiresAt = input.expires_at ? new Date(input.expires_at) : null
      if (expiresAt && expiresAt.getTime() <= deps.clock()) (errors.expires_at ??= []).push('must be in the future')
      if (Object.keys(errors).length) throw new ValidationError(errors)
      authorizeGrant(caller, { permissions, rules }, { what: 'The new Application' })
      authorizeLifetime(caller, expiresAt, { what: 'The new Application', field: 'expires_at' })
      const key = newApiKey(input.type)
      const application: ApplicationRecord = {
        ...newRecordStamp(caller),
        name: input.name,
        type: input.type,
        key_hash: hasher.hash(key),
        permissions,
        rules,
        expires_at: expiresAt,
      }
      // The key is shown once, in this answer: an insert that committed must not be reported as failed.
      await store.confirmed(() => store.applications.insert(application), () => store.applications.stored(application))
      return { application, key }
    },

    getApplication: (tenantId: string, id: string) => find(tenantId, id),

    listApplications(tenantId: string, filter: ApplicationFilter, page: number, size: number): Promise<Page<ApplicationRecord>> {
      return store.applications.list(tenantId, filter, page, size)
    },

    updateApplication: (caller: Principal, id: string, input: ApplicationUpdate) => authenticator.changing(() => updateApplication(caller, id, input)),
    regenerateKey: (caller: Principal, id: string) => authenticator.changing(() => regenerateKey(caller, id)),
    deleteApplication: (caller: Principal, id: string) => authenticator.changing(() => deleteApplication(caller, id)),

    /**
     * Deletes Applications past `expires_at` (their extra keys with them) and their sessions, in
     * batches. Nothing is invalidated: an Application and its sessions are refused from the instant
     * it expires, cached or not (authentication and every decision check the expiry a principal
     * carries, a session's no later than its Applications'), and their entries go with the cache's
     * time-to-live. A NOTIFY per key, or one "every key", would cost more than it frees.
     */
    async sweepExpired(now = new Date(deps.clock())): Promise<number> {
      // Sessions first: an expired Application makes and authorizes none, so none is left behind if this stops half-way.
      await store.sessions.deleteOfExpiredApplications(now)
      return store.applications.deleteExpired(now)
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
