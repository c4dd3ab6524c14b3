import type { Principal } from '../auth/principal.js'
import type { Database } from '../store/index.js'

/** Bounds: Reactor code is the bulk of an entry (up to `codeMaxChars` per piece of code). */
const MAX_ENTRIES = 10_000
const MAX_CODE_CHARS = 32 * 1024 * 1024

/** Something that runs Reactor code as an Application (a Reactor, a pre-configured proxy). */
export interface CodeEntry {
  actor: Principal | undefined
}

export interface CodeCache<E extends CodeEntry> {
  /** Memory first; otherwise `loader`, whose answer is kept unless an invalidation raced with it. */
  get(key: string, loader: () => Promise<E | undefined>): Promise<E | undefined>
  /** Entry `id` changed or went: dropped here at once and, by NOTIFY, in every other process. */
  invalidate(id: string): Promise<void>
  /** An Application's key was invalidated (grants, regenerate, delete, expiry): entries acting as it go. */
  dropActor(keyHash: string): void
  start(): Promise<void>
}

/**
 * The in-process cache behind Reactors and pre-configured proxies, so that neither reads its
 * record and acting Application from the database on every call. Bounded by entries and by
 * code size, least recently used out first. Every change drops entries in every process
 * (Postgres NOTIFY, as for authentication); if the listening connection is lost, caching is
 * switched off rather than risk running stale code or acting with stale grants.
 */
export function createCodeCache<E extends CodeEntry>(deps: {
  db: Database
  channel: string
  /** The id `invalidate` names (an entry may be kept under another key, e.g. a key hash). */
  idOf(entry: E): string
  sizeOf(entry: E): number
}): CodeCache<E> {
  const cache = new Map<string, E>()
  let codeChars = 0
  let caching = true
  // Bumped on every invalidation: a load that raced with one must not cache what it read.
  let generation = 0

  const remove = (key: string) => {
    const entry = cache.get(key)
    if (entry === undefined) return
    cache.delete(key)
    codeChars -= deps.sizeOf(entry)
  }
  const removeWhere = (match: (entry: E) => boolean) => {
    generation++
    for (const [key, entry] of cache) if (match(entry)) remove(key)
  }
  const drop = (id: string) => removeWhere((entry) => deps.idOf(entry) === id)

  function remember(key: string, entry: E): void {
    remove(key)
    const size = deps.sizeOf(entry)
    if (size > MAX_CODE_CHARS) return
    for (const oldest of cache.keys()) {
      if (cache.size < MAX_ENTRIES && codeChars + size <= MAX_CODE_CHARS) break
      remove(oldest)
    }
    cache.set(key, entry)
    codeChars += size
  }

  return {
    async get(key, loader) {
      const hit = cache.get(key)
      if (hit !== undefined) {
        // Map order is insertion order: moving a hit to the end keeps eviction least-recently-used.
        cache.delete(key)
        cache.set(key, hit)
        return hit
      }
      const seen = generation
      const entry = await loader()
      if (entry !== undefined && caching && seen === generation) remember(key, entry)
      return entry
    },
    async invalidate(id) {
      drop(id)
      await deps.db.notify(deps.channel, id)
    },
    dropActor: (keyHash) => removeWhere((entry) => entry.actor?.keyHash === keyHash),
    async start() {
      await deps.db.listen(deps.channel, drop)
      deps.db.onListenerLost(() => {
        caching = false
        generation++
        cache.clear()
        codeChars = 0
      })
    },
  }
}
