import { looksLikeKey, newApiKey, type ApiKeyHasher } from '../auth/api-keys.js'
import type { Principal } from '../auth/principal.js'
import type { Config } from '../config/index.js'
import { AppError, ValidationError } from '../errors/index.js'
import type { Forwarder } from '../egress/forward.js'
import type { TokenResolver } from '../proxy/plugins/detokenize/index.js'
import { createPreconfiguredPipelines } from '../proxy/preconfigured-proxy.js'
import type { InvalidationBus } from '../cache/invalidation-bus.js'
import { saveBound, type CodeHost, type CodeRunner } from '../reactors/code-host.js'
import { isUuid } from '../shapes/ids.js'
import { newRecordStamp, type Page, type ProxyRecord, type Store } from '../store/index.js'
import { createProxyCache, type CachedProxy } from './proxy-cache.js'
import { checkProxyInput, proxyCode, proxyFields, retireChangedTransforms, type ProxyInput } from './proxy-input.js'

export type { ProxyInput }

export interface ProxyWithKey {
  proxy: ProxyRecord
  /** Shown once: only its hash is stored. */
  key: string
}

/**
 * What `/proxy` with SVC-PROXY-KEY runs: the proxy, who it acts as and its service
 * (auth/policies.ts decides whether it may), and the key's hash to resolve it again by.
 */
export type ResolvedProxy = CachedProxy & {
  keyHash: string
  /** With `require_auth`, who saved the proxy as it is now (see CodeHost.saver): callers' expressions are detokenized within its grants too. */
  saver: Principal | null | undefined
}

/**
 * Pre-configured proxies: their CRUD, their keys, and resolving a key to the proxy. Each one
 * runs through proxy/ (the pipeline the ephemeral proxy runs too) with plugins of its own.
 */
export function preconfiguredProxiesService(deps: { store: Store; bus: InvalidationBus; hasher: ApiKeyHasher; host: CodeHost; forwarder: Forwarder; tokens: TokenResolver; config: Config }) {
  const { store, host, config } = deps
  const pipelineDeps = { forwarder: deps.forwarder, vault: deps.tokens, config }
  const pipelines = createPreconfiguredPipelines({ ...pipelineDeps, runner: host })
  // A proxy's transforms act as its Application within its binder's grants (see CodeHost.actor),
  // so each proxy runs them with a runner that knows its binder; made when it is loaded, not per call.
  const bound = (proxy: ProxyRecord): CodeRunner => ({
    invoke: (code, args, context) => host.invoke(code, args, { ...context, boundBy: proxy.bound_by }),
    actor: (tenantId, applicationId) => host.actor(tenantId, applicationId, proxy.bound_by),
  })
  const cache = createProxyCache({
    bus: deps.bus,
    async load(keyHash) {
      const proxy = await store.proxies.findByKeyHash(keyHash)
      if (proxy === undefined) return undefined
      const service = createPreconfiguredPipelines({ ...pipelineDeps, runner: bound(proxy) }).service(proxy)
      return { proxy, actor: await host.actor(proxy.tenant_id, proxy.application_id, proxy.bound_by), service }
    },
  })
  const resolve = async (keyHash: string): Promise<ResolvedProxy | undefined> => {
    const found = await cache.get(keyHash)
    if (found === undefined) return undefined
    const { proxy, service } = found
    const actor = proxy.bound_by === null ? found.actor : await host.actor(proxy.tenant_id, proxy.application_id, proxy.bound_by)
    const saver = proxy.require_auth ? await host.saver(proxy.tenant_id, proxy.bound_by) : null
    return { proxy, actor, service, keyHash, saver }
  }
  const notFound = () => new AppError('not_found', { detail: 'No proxy with this id.' })

  async function find(tenantId: string, id: string): Promise<ProxyRecord> {
    const proxy = isUuid(id) ? await store.proxies.findById(tenantId, id) : undefined
    if (!proxy) throw notFound()
    return proxy
  }

  /** The plugin configs of the proxy as it will be saved, validated now rather than on its first call. */
  function validatePlugins(record: ProxyRecord): void {
    try {
      pipelines.pipeline(record)
    } catch (err) {
      throw new ValidationError({ body: [(err as Error).message] })
    }
  }

  return {
    async createProxy(caller: Principal, input: ProxyInput): Promise<ProxyWithKey> {
      await checkProxyInput(caller, input, { host, policy: config.proxy })
      const key = newApiKey('proxy')
      const stamp = newRecordStamp(caller)
      const proxy: ProxyRecord = {
        ...proxyFields(caller, input),
        ...stamp,
        key_hash: deps.hasher.hash(key),
        version: host.version(proxyCode(input)),
      }
      validatePlugins(proxy)
      await saveBound(store.proxies.insert(proxy))
      return { proxy, key }
    },

    getProxy: (tenantId: string, id: string) => find(tenantId, id),

    listProxies: (tenantId: string, page: number, size: number): Promise<Page<ProxyRecord>> => store.proxies.list(tenantId, page, size),

    async updateProxy(caller: Principal, id: string, input: ProxyInput): Promise<ProxyRecord> {
      const current = await find(caller.tenantId, id)
      await host.authorizeBound(caller, current.application_id)
      await checkProxyInput(caller, input, { host, policy: config.proxy })
      const patch = { ...proxyFields(caller, input), version: host.version(proxyCode(input), { code: proxyCode(current), version: current.version }) }
      validatePlugins({ ...current, ...patch })
      const updated = await saveBound(store.proxies.update(caller.tenantId, id, patch))
      await cache.invalidate(current.key_hash)
      if (!updated) throw notFound()
      retireChangedTransforms(host, current, updated)
      return updated
    },

    async deleteProxy(caller: Principal, id: string): Promise<void> {
      const current = await find(caller.tenantId, id)
      await host.authorizeBound(caller, current.application_id)
      const deleted = await store.proxies.delete(caller.tenantId, id)
      await cache.invalidate(current.key_hash)
      if (!deleted) throw notFound()
      retireChangedTransforms(host, current, undefined)
    },

    /**
     * The proxy a SVC-PROXY-KEY names, in any tenant; undefined when none. No database round trip
     * once cached. Its Application is read again (a cached look-up by id): the entry goes when
     * that Application changes, not when its binder does, and the binder's grants bound it now.
     */
    resolveKey: (key: string): Promise<ResolvedProxy | undefined> => (looksLikeKey(key) ? resolve(deps.hasher.hash(key)) : Promise.resolve(undefined)),

    /** `resolveKey` again for the key `found` was resolved from, by its hash (no hashing): as it is now. */
    again: (found: ResolvedProxy): Promise<ResolvedProxy | undefined> => resolve(found.keyHash),

    start: () => cache.start(),
  }
}

export type PreconfiguredProxiesService = ReturnType<typeof preconfiguredProxiesService>
