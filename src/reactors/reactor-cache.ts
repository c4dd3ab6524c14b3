import type { Principal } from '../auth/principal.js'
import type { Database, ReactorRecord } from '../store/index.js'

const CHANNEL = 'tessera_reactors'
/** Bounds: Reactor code is the bulk of an entry (up to `codeMaxChars` each). */
const MAX_ENTRIES = 10_000
const MAX_CODE_CHARS = 32 * 1024 * 1024

/** A Reactor as `react` needs it: the record and the principal it acts as (its Application). */
export interface CachedReactor {
  reactor: ReactorRecord
  actor: Principal | undefined
}

export interface ReactorCache {
  /** The Reactor from memory when cached, else loaded (and cached); undefined when it does not exist. */
  get(tenantId: string, id: string): Promise<CachedReactor | undefined>
  /** The Reactor was updated or deleted: dropped here at once and, by NOTIFY, in every other process. */
  invalidate(reactorId: string): Promise<void>
  /**
   * An Application's key was invalidated (its grants changed, its key was regenerated, it was
   * deleted or expired): Reactors acting as it are dropped. Wired to the authenticator, which
   * hears about every such change, from this process and (by NOTIFY) from the others.
   */
  dropActor(keyHash: string): void
  start(): Promise<void>
}

/**
 * `POST /reactors/{id}/react` would otherwise read the Reactor and its Application from the
 * database on every call. Entries are dropped on every change, in every process (Postgres
 * NOTIFY, as for authentication); if the listening connection is lost, caching is switched off
 * rather than risk running stale code or acting with stale grants.
 */
export function createReactorCache(deps: {
  db: Database
  loadReactor: (tenantId: string, id: string) => Promise<ReactorRecord | undefined>
  loadActor: (reactor: ReactorRecord) => Promise<Principal | undefined>
}): ReactorCache {
  const cache = new Map<string, CachedReactor>()
  let codeChars = 0
  let caching = true
  // Bumped on every invalidation: a load that raced with one must not cache what it read.
  let generation = 0

  const remove = (id: string) => {
    const entry = cache.get(id)
    if (entry === undefined) return
    cache.delete(id)
    codeChars -= entry.reactor.code.length
  }
  const drop = (id: string) => {
    generation++
    remove(id)
  }

  function remember(entry: CachedReactor): void {
    const id = entry.reactor.id
    remove(id)
    if (entry.reactor.code.length > MAX_CODE_CHARS) return
    // Least recently used first: hits move their entry to the end.
    for (const oldest of cache.keys()) {
      if (cache.size < MAX_ENTRIES && codeChars + entry.reactor.code.length <= MAX_CODE_CHARS) break
      remove(oldest)
    }
    cache.set(id, entry)
    codeChars += entry.reactor.code.length
  }

  return {
    async get(tenantId, id) {
      const hit = cache.get(id)
      if (hit !== undefined && hit.reactor.tenant_id === tenantId) {
        cache.delete(id)
        cache.set(id, hit)
        return hit
      }
      const seen = generation
      const reactor = await deps.loadReactor(tenantId, id)
      if (reactor === undefined) return undefined
      const entry = { reactor, actor: await deps.loadActor(reactor) }
      if (caching && seen === generation) remember(entry)
      return entry
    },
    async invalidate(reactorId) {
      drop(reactorId)
      await deps.db.notify(CHANNEL, reactorId)
    },
    dropActor(keyHash) {
      generation++
      for (const [id, entry] of cache) if (entry.actor?.keyHash === keyHash) remove(id)
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
