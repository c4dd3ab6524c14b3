import type { Principal } from '../auth/principal.js'
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

export interface ProxyCache {
  /** The proxy whose key hashes to `keyHash`, from memory when cached, else loaded (and cached). */
  get(keyHash: string): Promise<CachedProxy | undefined>
  /** Entries are keyed, and so invalidated, by the proxy's key hash. */
  invalidate(keyHash: string): Promise<void>
  start(): Promise<void>
}

/** A proxy key resolves without a database round trip on every call. */
export function createProxyCache(deps: { bus: InvalidationBus; load: (keyHash: string) => Promise<CachedProxy | undefined> }): ProxyCache {
  const cache = createCodeCache<CachedProxy>({
    bus: deps.bus,
    channel: 'tessera_proxies',
    codeChars: (entry) => (entry.proxy.request_transform_code?.length ?? 0) + (entry.proxy.response_transform_code?.length ?? 0),
  })
  return {
    get: (keyHash) => cache.get(keyHash, () => deps.load(keyHash)),
    invalidate: (keyHash) => cache.invalidate(keyHash),
    start: () => cache.start(),
  }
}
