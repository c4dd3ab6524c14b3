import type { Logger } from 'pino'
import { AppError } from '../errors/index.js'
import type { Database } from '../store/index.js'
import { looksLikeKey, type KeyHasher } from './api-keys.js'
import type { Principal, PrincipalLookup } from './principal.js'

const CHANNEL = 'tessera_auth_invalidate'
const MAX_ENTRIES = 50_000

export interface Authenticator {
  /** Resolves a presented key; 401 when missing, unknown or expired. */
  authenticate(key: string | undefined): Promise<Principal>
  /** Drops a key from every process's cache (regenerate, delete, expiry). */
  invalidateKey(keyHash: string): Promise<void>
  /** Also told of every invalidated key, from this process and the others (caches keyed by principal). */
  onInvalidate(listener: (keyHash: string) => void): void
  start(): Promise<void>
}

/**
 * Authentication is on every request's path, so resolved principals are cached in memory.
 * A key that is regenerated or deleted must stop working at once in every Tessera process:
 * the change is announced with Postgres NOTIFY and each process drops the entry; if the
 * listening connection is lost, caching is switched off rather than risk a stale key.
 */
export function createAuthenticator(deps: { db: Database; hasher: KeyHasher; lookups: PrincipalLookup[]; logger: Logger }): Authenticator {
  const cache = new Map<string, Principal>()
  let caching = true
  // Bumped on every invalidation: a lookup that raced with one must not cache what it read.
  let generation = 0
  const listeners: ((keyHash: string) => void)[] = []

  const drop = (keyHash: string) => {
    generation++
    cache.delete(keyHash)
    for (const listener of listeners) listener(keyHash)
  }

  async function lookup(keyHash: string): Promise<Principal | undefined> {
    const cached = cache.get(keyHash)
    if (cached) return cached
    const seen = generation
    for (const find of deps.lookups) {
      const principal = await find(keyHash)
      if (principal) {
        if (caching && seen === generation) remember(keyHash, principal)
        return principal
      }
    }
    return undefined
  }

  function remember(keyHash: string, principal: Principal) {
    if (cache.size >= MAX_ENTRIES) {
      const oldest = cache.keys().next().value
      if (oldest !== undefined) cache.delete(oldest)
    }
    cache.set(keyHash, principal)
  }

  return {
    async authenticate(key) {
      if (!key) throw new AppError('unauthenticated', { detail: 'The SVC-API-KEY header is required.' })
      if (!looksLikeKey(key)) throw new AppError('unauthenticated', { detail: 'The API key is not valid.' })
      const keyHash = deps.hasher.hash(key)
      const principal = await lookup(keyHash)
      if (!principal || !deps.hasher.sameHash(keyHash, principal.keyHash)) {
        throw new AppError('unauthenticated', { detail: 'The API key is not valid.' })
      }
      if (principal.expiresAt && principal.expiresAt.getTime() <= Date.now()) {
        throw new AppError('unauthenticated', { detail: 'The API key has expired.' })
      }
      return principal
    },
    async invalidateKey(keyHash) {
      drop(keyHash)
      await deps.db.notify(CHANNEL, keyHash)
    },
    onInvalidate(listener) {
      listeners.push(listener)
    },
    async start() {
      await deps.db.listen(CHANNEL, drop)
      deps.db.onListenerLost(() => {
        if (caching) deps.logger.error('lost the invalidation listener; authentication caching is off')
        caching = false
        cache.clear()
      })
    },
  }
}
