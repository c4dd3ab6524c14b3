import { randomUUID } from 'node:crypto'
import type { Logger } from 'pino'
import type { AuditRecorder } from '../audit/audit-log.js'
import type { AuditAction, AuditEvent, TargetType } from '../audit/events.js'
import { newApiKey, type ApiKeyHasher } from '../auth/api-keys.js'
import { fullCeiling, permissionsFor } from '../auth/permissions.js'
import { AppError } from '../errors/index.js'
import type { TenantSettingsCache } from './settings-cache.js'
import { defaultTenantSettings, isUniqueViolation, newRecordStamp, type ApplicationRecord, type Store, type StoreTransaction, type Tenant, type TenantSettings } from '../store/index.js'

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

/** Writes a new tenant's events inside its creating transaction (rejecting when it cannot): the caller adds its request's fields. */
export type RecordTenantCreation = (trx: StoreTransaction, events: readonly TenantCreationEvent[]) => Promise<void>

/** For creations made outside any request (`tessera tenant create`, the bootstrap): no trace id, client IP or route. */
export function recordWithoutRequest(audit: AuditRecorder): RecordTenantCreation {
  return (trx, events) => audit.recordIn(trx, events.map((event) => ({ ...event, traceId: null, clientIp: null })))
}

export function tenantsService(deps: {
  store: Store
  hasher: ApiKeyHasher
  settings: Pick<TenantSettingsCache, 'invalidate'>
  logger: Pick<Logger, 'info'>
}) {
  const { store, hasher, logger } = deps

  /**
   * A tenant and its first management Application, holding every management permission and
   * the full grant ceiling (it may hand out any token permission; its own key still acts on no token).
   * `within` runs in the same transaction, after both are inserted: if it fails, neither stands.
   */
  async function createTenant(name: string, key = newApiKey('management'), within?: (created: TenantWithKey, trx: StoreTransaction) => Promise<void>): Promise<TenantWithKey> {
    const now = new Date()
    const tenant: Tenant = { id: randomUUID(), name, settings: { ...defaultTenantSettings }, created_at: now, modified_at: now }
    const application: ApplicationRecord = {
      ...newRecordStamp({ id: null, tenantId: tenant.id }, now),
      name: managementName(name),
      type: 'management',
      key_hash: hasher.hash(key),
      permissions: permissionsFor('management'),
      rules: [fullCeiling()],
      expires_at: null,
    }
    const created = { tenant, application, key }
    try {
      await store.transaction(async (trx) => {
        await store.tenants.insert(tenant, trx)
        await store.applications.insert(application, trx)
        await within?.(created, trx)
      })
    } catch (err) {
      if (isUniqueViolation(err)) throw new AppError('conflict', { detail: 'A tenant with this name exists.', cause: err })
      throw err
    }
    return created
  }

  /**
   * `createTenant` with its events (`tenantCreationEvents`) written by `record` in the same
   * transaction: the tenant, its Application and the first entries of its chain commit together
   * or not at all, so no tenant ever stands unrecorded (a process killed halfway, a write that
   * failed), and the key may be shown once this resolves. A failed `record` is rethrown.
   */
  function createRecordedTenant(name: string, key: string | undefined, record: RecordTenantCreation): Promise<TenantWithKey> {
    return createTenant(name, key, (created, trx) => record(trx, tenantCreationEvents(created)))
  }

  return {
    createTenant,
    createRecordedTenant,

    /**
     * On an empty database, creates tenant `default` with its entries (as `tessera tenant create`
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

/** Names hold at most 200 characters, a tenant's too: its management Application's keeps within them. */
const NAME_MAX_LENGTH = 200
const MANAGEMENT_SUFFIX = ' management'

/** `<tenant name> management`, the tenant's name cut (by whole characters) where both would not fit. */
function managementName(tenantName: string): string {
  const room = NAME_MAX_LENGTH - MANAGEMENT_SUFFIX.length
  const chars = [...tenantName]
  return `${chars.length > room ? chars.slice(0, room).join('') : tenantName}${MANAGEMENT_SUFFIX}`
}
