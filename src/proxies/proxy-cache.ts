import type { Principal } from '../auth/principal.js'
import type { ProxyService } from '../proxy/service.js'
import { createCodeCache } from '../reactors/code-cache.js'
import type { Database, ProxyRecord } from '../store/index.js'

/** A proxy as `/proxy` needs it: the record, the Application it acts as, and its own pipeline. */
export interface CachedProxy {
  proxy: ProxyRecord
  actor: Principal | undefined
  service: ProxyService
}

export interface ProxyCache {
  /** The proxy whose key hashes to `keyHash`, from memory when cached, else loaded (and cached). */
  get(keyHash: string): Promise<CachedProxy | undefined>
  invalidate(proxyId: string): Promise<void>
  dropActor(keyHash: string): void
  start(): Promise<void>
}

/** A proxy key resolves without a database round trip on every call; entries are keyed by key hash. */
export function createProxyCache(deps: { db: Database; load: (keyHash: string) => Promise<CachedProxy | undefined> }): ProxyCache {
  const cache = createCodeCache<CachedProxy>({
    db: deps.db,
    channel: 'tessera_proxies',
    idOf: (entry) => entry.proxy.id,
    sizeOf: (entry) => (entry.proxy.request_transform_code?.length ?? 0) + (entry.proxy.response_transform_code?.length ?? 0),
  })
  return {
    get: (keyHash) => cache.get(keyHash, () => deps.load(keyHash)),
    invalidate: (id) => cache.invalidate(id),
    dropActor: (keyHash) => cache.dropActor(keyHash),
    start: () => cache.start(),
  }
}
