import { applicationPrincipal } from '../auth/application-lookup.js'
import { AUTH_CHANNEL } from '../auth/authenticator.js'
import type { Principal } from '../auth/principal.js'
import { approximateBytes } from '../cache/approximate-bytes.js'
import { createInvalidatingCache } from '../cache/invalidating-cache.js'
import type { InvalidationBus } from '../cache/invalidation-bus.js'
import { isUuid } from '../shapes/ids.js'
import type { Store } from '../store/index.js'

export interface ActorLookup {
  /** The principal code bound to an Application acts as now; undefined when the Application is gone. */
  find(tenantId: string, applicationId: string): Promise<Principal | undefined>
  /** Listens for changes, as every cache does before the server answers (services.ts). */
  start(): Promise<void>
}

/**
 * The Applications code acts as, by id, so that every bridge call of a running invocation acts
 * with the Application's current grants (or not at all once it is gone) without a database
 * round trip. An entry goes when its Application's key is invalidated on AUTH_CHANNEL, which
 * updating (its grants), regenerating the key of and deleting an Application all publish: here
 * at once, in other processes by NOTIFY. Without a bus every lookup reads the store.
 */
export function createActorLookup(store: Store, bus?: InvalidationBus): ActorLookup {
  const load = async (tenantId: string, id: string): Promise<Principal | undefined> => {
    const app = isUuid(id) ? await store.applications.findById(tenantId, id) : undefined
    return app ? applicationPrincipal(app) : undefined
  }
  if (bus === undefined) return { find: load, start: () => Promise.resolve() }
  const cache = createInvalidatingCache<Principal>({
    bus,
    channel: 'tessera_code_actors',
    maxEntries: 10_000,
    maxBytes: 16 * 1024 * 1024,
    sizeOf: approximateBytes,
    dependsOn: { channel: AUTH_CHANNEL, keyOf: (actor) => actor.keyHash },
  })
  return {
    // By tenant and id: a load reads within the asking tenant, so a miss shares a load (and an
    // entry) only with lookups of the same tenant.
    find: (tenantId, id) => cache.get(`${tenantId}:${id.toLowerCase()}`, () => load(tenantId, id)),
    start: () => cache.start(),
  }
}
