import type { Logger } from 'pino'
import { approximateBytes } from '../cache/approximate-bytes.js'
import { createInvalidatingCache, loadingCache } from '../cache/invalidating-cache.js'
import { systemClock, type Clock } from '../clock.js'
import { EVERY_KEY, type InvalidationBus } from '../cache/invalidation-bus.js'
import { AppError } from '../errors/index.js'
import { looksLikeKey, type ApiKeyHasher } from './api-keys.js'
import type { Principal, PrincipalLookup } from './principal.js'

/** Publishes the key hash of every key that changed or went; caches keyed by principal follow it. */
export const AUTH_CHANNEL = 'tessera_auth_invalidate'

export interface Authenticator {
  /** Resolves a presented key; 401 when missing, unknown or expired. */
  authenticate(key: string | undefined): Promise<Principal>
  /** `authenticate` again for the key `principal` was resolved from, by its hash (no header, no hashing): 401 when it no longer authenticates. */
  again(principal: Principal): Promise<Principal>
  /**
   * The principal the key `principal` was resolved from resolves to now (a cache hit when
   * nothing changed); undefined when that key no longer authenticates (regenerated, deleted).
   * Expiry is left to the caller.
   */
  current(principal: Principal): Promise<Principal | undefined>
  /** Drops a key from every process's cache (regenerate, delete, expiry). */
  invalidateKey(keyHash: string): Promise<void>
  /**
   * Drops these keys from every process's cache: one NOTIFY statement and a wait for the echoes;
   * past a hundred, one "every key" (and what depends on them) does it instead.
   */
  invalidateKeys(keyHashes: readonly string[]): Promise<void>
  /**
   * Runs a change of keys or grants. When it fails other than by a refusal (an answer lost after
   * the commit, a failure between the commit and its invalidations), the change may stand with
   * no invalidation sent: every process then drops every cached principal (and what depends on them).
   */
  changing<T>(change: () => Promise<T>): Promise<T>
  /** Also told of every invalidated key, from this process and the others (caches keyed by principal). */
  onInvalidate(listener: (keyHash: string) => void): void
  start(): Promise<void>
}

/**
 * Authentication is on every request's path, so resolved principals are cached in memory.
 * A key that is regenerated or deleted must stop working at once in every Tessera process:
 * the invalidating cache drops it everywhere (and caches nothing while it could miss that).
 */
const MAX_SINGLE_INVALIDATIONS = 100

export function createAuthenticator(deps: { bus: InvalidationBus; hasher: ApiKeyHasher; lookups: PrincipalLookup[]; logger: Logger; clock?: Clock }): Authenticator {
  const clock = deps.clock ?? systemClock
  const cached = createInvalidatingCache<Principal>({ bus: deps.bus, channel: AUTH_CHANNEL, maxEntries: 50_000, maxBytes: 32 * 1024 * 1024, sizeOf: approximateBytes })

  async function lookup(keyHash: string): Promise<Principal | undefined> {
    for (const find of deps.lookups) {
      const principal = await find(keyHash)
      if (principal) return principal
    }
    return undefined
  }
  const cache = loadingCache(cached, lookup)
  // The entry was found by this hash (a map look-up, on an HMAC the presenter cannot steer), so
  // a plain comparison tells no more: it only refuses a principal loaded for another key.
  const resolve = async (keyHash: string) => {
    const principal = await cache.get(keyHash)
    return principal?.keyHash === keyHash ? principal : undefined
  }
  const valid = (principal: Principal | undefined): Principal => {
    if (!principal) throw new AppError('unauthenticated', { detail: 'The API key is not valid.' })
    if (principal.expiresAt && principal.expiresAt.getTime() <= clock()) throw new AppError('unauthenticated', { detail: 'The API key has expired.' })
    return principal
  }

  return {
    async authenticate(key) {
      if (!key) throw new AppError('unauthenticated', { detail: 'The SVC-API-KEY header is required.' })
      if (!looksLikeKey(key)) throw new AppError('unauthenticated', { detail: 'The API key is not valid.' })
      return valid(await resolve(deps.hasher.hash(key)))
    },
    again: async (principal) => valid(await resolve(principal.keyHash)),
    current: (principal) => resolve(principal.keyHash),
    invalidateKey: (keyHash) => cache.invalidate(keyHash),
    async invalidateKeys(keyHashes) {
      // All in one statement: one after the other, a database that froze after the change's
      // commit held its answer for every key's time-outs in turn (80 s for 100 keys).
      await cache.invalidate(keyHashes.length > MAX_SINGLE_INVALIDATIONS ? EVERY_KEY : keyHashes)
    },
    async changing(change) {
      try {
        return await change()
      } catch (err) {
        if (!(err instanceof AppError) || err.status >= 500) await cache.invalidate(EVERY_KEY)
        throw err
      }
    },
    onInvalidate(listener) {
      deps.bus.subscribe(AUTH_CHANNEL, listener).catch((err: unknown) => deps.logger.error({ err }, 'could not listen for key invalidations'))
    },
    start: () => cache.start(),
  }
}
