import { randomUUID } from 'node:crypto'
import type { Logger } from 'pino'
import type { AuditAction, AuditEvent, TargetType } from '../audit/events.js'
import { newApiKey, type ApiKeyHasher } from '../auth/api-keys.js'
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

export function tenantsService(deps: { store: Store; hasher: ApiKeyHasher; settings: Pick<TenantSettingsCache, 'invalidate'> }) {
  const { store, hasher } = deps

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

  return {
    createTenant,

    /** On an empty database, creates tenant `default`; prints a generated key once. */
    async bootstrap(bootstrapKey: string | undefined, logger: Logger): Promise<void> {
      if ((await store.tenants.count()) > 0) return
      let created: TenantWithKey
      try {
        created = await createTenant('default', bootstrapKey)
      } catch (err) {
        // Another process bootstrapped the same database at the same moment.
        if (err instanceof AppError && err.code === 'conflict') return
        throw err
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
