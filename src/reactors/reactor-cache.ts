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
  invalidate(tenantId: string, reactorId: string): Promise<void>
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
  // By tenant and id: a load reads within the caller's tenant, so a miss must share a load (and
  // an entry) only with callers of the same tenant (another tenant's miss read as the owner's 404).
  const keyOf = (tenantId: string, id: string) => `${tenantId}:${id}`
  return {
    get: (tenantId, id) => cache.get(keyOf(tenantId, id), () => load(tenantId, id)),
    invalidate: (tenantId, id) => cache.invalidate(keyOf(tenantId, id)),
    start: () => cache.start(),
  }
}
