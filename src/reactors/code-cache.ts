import { AUTH_CHANNEL } from '../auth/authenticator.js'
import type { Principal } from '../auth/principal.js'
import { createInvalidatingCache, type InvalidatingCache } from '../cache/invalidating-cache.js'
import type { InvalidationBus } from '../cache/invalidation-bus.js'

/** Something that runs Reactor code as an Application (a Reactor, a pre-configured proxy). */
export interface CodeEntry {
  actor: Principal | undefined
}

/**
 * The cache behind Reactors and pre-configured proxies, so that neither reads its record and
 * acting Application from the database on every call. Code is the bulk of an entry; an entry
 * also goes when the key of the Application it acts as changes (grants, regenerate, delete).
 */
export function createCodeCache<E extends CodeEntry>(deps: { bus: InvalidationBus; channel: string; codeChars(entry: E): number }): InvalidatingCache<E> {
  return createInvalidatingCache<E>({
    bus: deps.bus,
    channel: deps.channel,
    maxEntries: 10_000,
    maxBytes: 64 * 1024 * 1024,
    // UTF-16 code, plus the record and actor around it.
    sizeOf: (entry) => deps.codeChars(entry) * 2 + 2048,
    dependsOn: { channel: AUTH_CHANNEL, keyOf: (entry) => entry.actor?.keyHash },
  })
}
