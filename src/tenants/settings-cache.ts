import type { Database, Tenant, TenantSettings } from '../store/index.js'
import { AppError } from '../errors/index.js'
import type { TenantsService } from './service.js'

const CHANNEL = 'tessera_tenant_settings'
// Invalidation is by NOTIFY; the TTL is a second line that bounds staleness should a
// notification ever be missed.
const TTL_MS = 5_000

export interface TenantSettingsCache {
  /** The tenant's settings, from memory when fresh: the proxy reads them on every request. */
  get(tenantId: string): Promise<TenantSettings>
  /** Drops the tenant from every process's cache. */
  invalidate(tenantId: string): Promise<void>
  start(): Promise<void>
}

export function createTenantSettingsCache(deps: { db: Database; load: (id: string) => Promise<Tenant | undefined> }): TenantSettingsCache {
  const cache = new Map<string, { settings: TenantSettings; until: number }>()
  // Bumped on every invalidation: a load that raced with one must not cache what it read.
  let generation = 0
  const drop = (tenantId: string) => {
    generation++
    cache.delete(tenantId)
  }

  return {
    async get(tenantId) {
      const hit = cache.get(tenantId)
      const now = Date.now()
      if (hit && hit.until > now) return hit.settings
      const seen = generation
      const tenant = await deps.load(tenantId)
      if (!tenant) throw new AppError('forbidden', { detail: 'The tenant does not exist.' })
      if (seen === generation) cache.set(tenantId, { settings: tenant.settings, until: now + TTL_MS })
      return tenant.settings
    },
    async invalidate(tenantId) {
      drop(tenantId)
      await deps.db.notify(CHANNEL, tenantId)
    },
    async start() {
      await deps.db.listen(CHANNEL, drop)
      deps.db.onListenerLost(() => cache.clear())
    },
  }
}

/** The tenants service with every settings change announced to the cache. */
export function invalidatingSettings(service: TenantsService, cache: TenantSettingsCache): TenantsService {
  return {
    ...service,
    async updateSettings(id, patch) {
      const tenant = await service.updateSettings(id, patch)
      await cache.invalidate(id)
      return tenant
    },
  }
}
