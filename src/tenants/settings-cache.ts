import { approximateBytes } from '../cache/approximate-bytes.js'
import { createInvalidatingCache, loadingCache } from '../cache/invalidating-cache.js'
import type { InvalidationBus } from '../cache/invalidation-bus.js'
import { AppError } from '../errors/index.js'
import type { Tenant, TenantSettings } from '../store/index.js'

export interface TenantSettingsCache {
  /** The tenant's settings, from memory when fresh: the proxy reads them on every request. */
  get(tenantId: string): Promise<TenantSettings>
  /** Drops the tenant from every process's cache. */
  invalidate(tenantId: string): Promise<void>
  start(): Promise<void>
}

export function createTenantSettingsCache(deps: { bus: InvalidationBus; load: (id: string) => Promise<Tenant | undefined> }): TenantSettingsCache {
  const cached = createInvalidatingCache<TenantSettings>({
    bus: deps.bus,
    channel: 'tessera_tenant_settings',
    maxEntries: 10_000,
    maxBytes: 4 * 1024 * 1024,
    // Invalidation is by NOTIFY; the TTL is a second line that bounds staleness should one be missed.
    ttlMs: 5_000,
    sizeOf: approximateBytes,
  })
  const cache = loadingCache(cached, async (tenantId) => (await deps.load(tenantId))?.settings)
  return {
    ...cache,
    async get(tenantId) {
      const settings = await cache.get(tenantId)
      if (!settings) throw new AppError('forbidden', { detail: 'The tenant does not exist.' })
      return settings
    },
  }
}
