import type { Principal } from '../auth/principal.js'
import type { ProxyService } from '../proxy/service.js'
import type { Database, ProxyRecord } from '../store/index.js'

const CHANNEL = 'tessera_proxies'
/** Bounds: transform code is the bulk of an entry (up to `codeMaxChars` per transform). */
const MAX_ENTRIES = 10_000
const MAX_CODE_CHARS = 32 * 1024 * 1024

/** A proxy as `/proxy` needs it: the record, the Application it acts as, and its own pipeline. */
export interface CachedProxy {
  proxy: ProxyRecord
  actor: Principal | undefined
  service: ProxyService
}

export interface ProxyCache {
  /** The proxy whose key hashes to `keyHash`, from memory when cached, else loaded (and cached). */
  get(keyHash: string): Promise<CachedProxy | undefined>
  /** The proxy was updated or deleted: dropped here at once and, by NOTIFY, in every other process. */
  invalidate(proxyId: string): Promise<void>
  /** An Application's key was invalidated (grants, regenerate, delete, expiry): proxies acting as it are dropped. */
  dropActor(keyHash: string): void
  start(): Promise<void>
}

/**
 * A proxy key must resolve without a database round trip on every call, so resolved proxies
 * stay in memory. Every change drops them in every process (Postgres NOTIFY, as for
 * authentication); if the listening connection is lost, caching is switched off rather than
 * risk forwarding with a stale destination, stale code or stale grants.
 */
export function createProxyCache(deps: { db: Database; load: (keyHash: string) => Promise<CachedProxy | undefined> }): ProxyCache {
  const cache = new Map<string, CachedProxy>()
  let codeChars = 0
  let caching = true
  // Bumped on every invalidation: a load that raced with one must not cache what it read.
  let generation = 0

  const sizeOf = (entry: CachedProxy) => (entry.proxy.request_transform_code?.length ?? 0) + (entry.proxy.response_transform_code?.length ?? 0)
  const remove = (keyHash: string) => {
    const entry = cache.get(keyHash)
    if (entry === undefined) return
    cache.delete(keyHash)
    codeChars -= sizeOf(entry)
  }
  const drop = (proxyId: string) => {
    generation++
    for (const [keyHash, entry] of cache) if (entry.proxy.id === proxyId) remove(keyHash)
  }

  function remember(keyHash: string, entry: CachedProxy): void {
    remove(keyHash)
    const size = sizeOf(entry)
    if (size > MAX_CODE_CHARS) return
    // Oldest first (insertion order): a full cache makes room by dropping from the front.
    for (const oldest of cache.keys()) {
      if (cache.size < MAX_ENTRIES && codeChars + size <= MAX_CODE_CHARS) break
      remove(oldest)
    }
    cache.set(keyHash, entry)
    codeChars += size
  }

  return {
    async get(keyHash) {
      const hit = cache.get(keyHash)
      if (hit !== undefined) return hit
      const seen = generation
      const entry = await deps.load(keyHash)
      if (entry !== undefined && caching && seen === generation) remember(keyHash, entry)
      return entry
    },
    async invalidate(proxyId) {
      drop(proxyId)
      await deps.db.notify(CHANNEL, proxyId)
    },
    dropActor(keyHash) {
      generation++
      for (const [hash, entry] of cache) if (entry.actor?.keyHash === keyHash) remove(hash)
    },
    async start() {
      await deps.db.listen(CHANNEL, drop)
      deps.db.onListenerLost(() => {
        caching = false
        generation++
        cache.clear()
        codeChars = 0
      })
    },
  }
}
