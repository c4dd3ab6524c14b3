import { randomUUID } from 'node:crypto'
import type { Logger } from 'pino'
import type { AuditRecorder } from '../audit/audit-log.js'
import type { AuditAction, AuditEvent, TargetType } from '../audit/events.js'
import { newApiKey, type ApiKeyHasher } from '../auth/api-keys.js'
import type { Authenticator } from '../auth/authenticator.js'
import { fullCeiling, permissionsFor } from '../auth/permissions.js'
import { AppError } from '../errors/index.js'
import type { TenantSettingsCache } from './settings-cache.js'
import { defaultTenantSettings, isUniqueViolation, newRecordStamp, type ApplicationRecord, type Store, type Tenant, type TenantSettings } from '../store/index.js'

export interface TenantWithKey {
  tenant: Tenant
  application: ApplicationRecord
  key: string
}

/** An event without the request's own fields (trace id, client IP, route): those are the caller's to add. */
export type TenantCreationEvent = Omit<AuditEvent, 'traceId' | 'clientIp' | 'request'>

/**
 * What creating a tenant is in the audit log (the operator, `POST /tenants` or `tessera tenant
 * create`, names no one): `tenant.create` and the `application.create` of its management
 * Application, the first entries of the new tenant's chain. Recorded together before the key is
 * shown, and never the key itself.
 */
export function tenantCreationEvents({ tenant, application }: TenantWithKey): TenantCreationEvent[] {
  const event = (action: AuditAction, type: TargetType, id: string): TenantCreationEvent => ({
    tenantId: tenant.id,
    actor: { kind: 'operator', id: null },
    action,
    target: { type, ids: [id] },
    outcome: 'success',
    status: 201,
  })
  return [event('tenant.create', 'tenant', tenant.id), event('application.create', 'application', application.id)]
}

/** Writes a new tenant's events durably (rejecting when it cannot): the caller adds its request's fields. */
export type RecordTenantCreation = (events: readonly TenantCreationEvent[]) => Promise<void>

/** For creations made outside any request (`tessera tenant create`, the bootstrap): no trace id, client IP or route. */
export function recordWithoutRequest(audit: AuditRecorder): RecordTenantCreation {
  return (events) => audit.record(events.map((event) => ({ ...event, traceId: null, clientIp: null })))
}

export function tenantsService(deps: {
  store: Store
  hasher: ApiKeyHasher
  settings: Pick<TenantSettingsCache, 'invalidate'>
  logger: Pick<Logger, 'info' | 'error'>
  /** Told of a removed management key (see `removeUnrecorded`); the CLI, which caches none, has none. */
  authenticator?: Pick<Authenticator, 'invalidateKey'>
}) {
  const { store, hasher, logger } = deps

  /**
   * A tenant and its first management Application, holding every management permission and
   * the full grant ceiling (it may hand out any token permission; its own key still acts on no token).
   */
  async function createTenant(name: string, key = newApiKey('management')): Promise<TenantWithKey> {
    const now = new Date()
    const tenant: Tenant = { id: randomUUID(), name, settings: { ...defaultTenantSettings }, created_at: now, modified_at: now }
    const application: ApplicationRecord = {
      ...newRecordStamp({ id: null, tenantId: tenant.id }, now),
      name: `${name} management`,
      type: 'management',
      key_hash: hasher.hash(key),
      permissions: permissionsFor('management'),
      rules: [fullCeiling()],
      expires_at: null,
    }
    try {
      await store.transaction(async (trx) => {
        await store.tenants.insert(tenant, trx)
        await store.applications.insert(application, trx)
      })
    } catch (err) {
      if (isUniqueViolation(err)) throw new AppError('conflict', { detail: 'A tenant with this name exists.', cause: err })
      throw err
    }
    return { tenant, application, key }
  }

  /**
   * `createTenant`, then `record` of its events (`tenantCreationEvents`); the key may be shown
   * once this resolves. If the events cannot be written the tenant and its Application are
   * removed again and `record`'s error is rethrown: otherwise they would stand with no entries
   * and a key nobody saw, and the name could never be used again.
   */
  async function createRecordedTenant(name: string, key: string | undefined, record: RecordTenantCreation): Promise<TenantWithKey> {
    const created = await createTenant(name, key)
    try {
      await record(tenantCreationEvents(created))
    } catch (err) {
      await removeUnrecorded(created)
      throw err
    }
    return created
  }

  /**
   * Safe because the key never left (a generated one was not shown yet; a configured bootstrap
   * key could only have been tried in these few milliseconds), so nothing was made with it and
   * the tenant holds these two rows alone (any other would go with it: foreign keys cascade).
   * A `record` that timed out may still commit later: its entries then name a tenant that no
   * longer exists. That is acceptable (entries outlive tenants anyway, and a retry gets a new
   * id); a tenant with no entries is not. If the removal fails the tenant stands, as before this
   * existed: that is logged, and the caller still gets `record`'s error.
   */
  async function removeUnrecorded({ tenant, application }: TenantWithKey): Promise<void> {
    try {
      // Its Application goes with it (foreign keys cascade).
      await store.tenants.delete(tenant.id)
    } catch (err) {
      logger.error({ err, tenant_id: tenant.id, name: tenant.name }, 'a tenant whose creation could not be recorded in the audit log could not be removed; it stands with no entries and a key nobody saw')
      return
    }
    // Only another process racing a configured bootstrap key could have cached them.
    await Promise.all([deps.authenticator?.invalidateKey(application.key_hash), deps.settings.invalidate(tenant.id)]).catch((err: unknown) =>
      logger.error({ err, tenant_id: tenant.id }, 'a removed tenant\'s key could not be dropped from the caches'),
    )
  }

  return {
    createTenant,
    createRecordedTenant,

    /**
     * On an empty database, creates tenant `default`, records it (as `tessera tenant create`
     * does), then prints a generated key once. If the entries cannot be written, start-up fails,
     * no key is shown and no tenant is left, so the next start tries again.
     */
    async bootstrap(bootstrapKey: string | undefined, audit: AuditRecorder): Promise<void> {
      if ((await store.tenants.count()) > 0) return
      let created: TenantWithKey
      try {
        created = await createRecordedTenant('default', bootstrapKey, recordWithoutRequest(audit))
      } catch (err) {
        // Another process bootstrapped the same database at the same moment.
        if (err instanceof AppError && err.code === 'conflict') return
        const why = err instanceof Error ? err.message : String(err)
        throw new Error(`could not create tenant "default": ${why}`, { cause: err })
      }
      if (bootstrapKey) {
        logger.info({ tenant_id: created.tenant.id }, 'created tenant default with the SVC_BOOTSTRAP_API_KEY management key')
      } else {
        // Printed to stdout, outside the logger, so log shipping never carries it.
        process.stdout.write(`\nTessera created tenant "default". Its management API key (shown once):\n\n  ${created.key}\n\n`)
      }
    },

    async getTenant(id: string): Promise<Tenant> {
      const tenant = await store.tenants.findById(id)
      if (!tenant) throw new AppError('not_found', { detail: 'No such tenant.' })
      return tenant
    },

    async updateSettings(id: string, patch: Partial<TenantSettings>): Promise<Tenant> {
      const current = await store.tenants.findById(id)
      if (!current) throw new AppError('not_found', { detail: 'No such tenant.' })
      const updated = await store.tenants.updateSettings(id, { ...current.settings, ...patch }, new Date())
      if (!updated) throw new AppError('not_found', { detail: 'No such tenant.' })
      // The stored id, not the one asked with: uuids match in any case, cache keys only in one.
      await deps.settings.invalidate(current.id)
      return updated
    },
  }
}

export type TenantsService = ReturnType<typeof tenantsService>
