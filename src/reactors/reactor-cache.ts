import type { Principal } from '../auth/principal.js'
import type { InvalidationBus } from '../cache/invalidation-bus.js'
import type { ReactorRecord } from '../store/index.js'
import { createCodeCache } from './code-cache.js'

/** A Reactor as `react` needs it: the record and the principal it acts as (its Application). */
export interface CachedReactor {
  reactor: ReactorRecord
  actor: Principal | undefined
}

export interface ReactorCache {
  /** The Reactor from memory when cached, else loaded (and cached); undefined when it does not exist. */
  get(tenantId: string, id: string): Promise<CachedReactor | undefined>
  invalidate(reactorId: string): Promise<void>
  start(): Promise<void>
}

/** `POST /reactors/{id}/react` without reading the Reactor and its Application on every call. */
export function createReactorCache(deps: {
  bus: InvalidationBus
  loadReactor: (tenantId: string, id: string) => Promise<ReactorRecord | undefined>
  loadActor: (reactor: ReactorRecord) => Promise<Principal | undefined>
}): ReactorCache {
  const cache = createCodeCache<CachedReactor>({ bus: deps.bus, channel: 'tessera_reactors', codeChars: (entry) => entry.reactor.code.length })
  const load = async (tenantId: string, id: string): Promise<CachedReactor | undefined> => {
    const reactor = await deps.loadReactor(tenantId, id)
    return reactor && { reactor, actor: await deps.loadActor(reactor) }
  }
  return {
    async get(tenantId, id) {
      const entry = await cache.get(id, () => load(tenantId, id))
      // Ids are unique across tenants, but another tenant's Reactor must still read as missing.
      return entry?.reactor.tenant_id === tenantId ? entry : undefined
    },
    invalidate: (id) => cache.invalidate(id),
    start: () => cache.start(),
  }
}
