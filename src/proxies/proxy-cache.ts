import type { Principal } from '../auth/principal.js'
import { loadingCache, type LoadingCache } from '../cache/invalidating-cache.js'
import type { InvalidationBus } from '../cache/invalidation-bus.js'
import type { ProxyService } from '../proxy/service.js'
import { createCodeCache } from '../reactors/code-cache.js'
import type { ProxyRecord } from '../store/index.js'

/** A proxy as `/proxy` needs it: the record, the Application it acts as, and its own pipeline. */
export interface CachedProxy {
  proxy: ProxyRecord
  actor: Principal | undefined
  service: ProxyService
}

/** Keyed, and so invalidated, by the proxy's key hash. */
export type ProxyCache = LoadingCache<CachedProxy>

/** A proxy key resolves without a database round trip on every call. */
export function createProxyCache(deps: { bus: InvalidationBus; load: (keyHash: string) => Promise<CachedProxy | undefined> }): ProxyCache {
  const cache = createCodeCache<CachedProxy>({
    bus: deps.bus,
    channel: 'tessera_proxies',
    codeChars: (entry) => (entry.proxy.request_transform_code?.length ?? 0) + (entry.proxy.response_transform_code?.length ?? 0),
  })
  return loadingCache(cache, deps.load)
}
