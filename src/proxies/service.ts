import { looksLikeKey, newApiKey, type ApiKeyHasher } from '../auth/api-keys.js'
import type { Principal } from '../auth/principal.js'
import type { Config } from '../config/index.js'
import { AppError, ValidationError, type FieldErrors } from '../errors/index.js'
import { buildDestination } from '../egress/destination-url.js'
import type { Forwarder } from '../egress/forward.js'
import type { TokenResolver } from '../proxy/plugins/detokenize/index.js'
import { createPreconfiguredPipelines, transformReactorId, type TransformKind } from '../proxy/preconfigured-proxy.js'
import type { InvalidationBus } from '../cache/invalidation-bus.js'
import type { CodeHost, CodeList, CodePiece } from '../reactors/code-host.js'
import { isUuid } from '../shapes/ids.js'
import { changeStamp, newRecordStamp, type Page, type ProxyRecord, type Store } from '../store/index.js'
import { createProxyCache, type CachedProxy } from './proxy-cache.js'

export interface ProxyInput {
  name: string
  destination_url: string
  request_transform?: { code: string }
  response_transform?: { code: string }
  configuration?: Record<string, string>
  application?: { id: string } | null
  require_auth?: boolean
}

export interface ProxyWithKey {
  proxy: ProxyRecord
  /** Shown once: only its hash is stored. */
  key: string
}

/** What `/proxy` with SVC-PROXY-KEY runs: the proxy, who it acts as and its service (auth/policies.ts decides whether it may). */
export type ResolvedProxy = CachedProxy

const KINDS: readonly TransformKind[] = ['request', 'response']

/**
 * Pre-configured proxies: their CRUD, their keys, and resolving a key to the proxy. Each one
 * runs through proxy/ (the pipeline the ephemeral proxy runs too) with plugins of its own.
 */
export function preconfiguredProxiesService(deps: { store: Store; bus: InvalidationBus; hasher: ApiKeyHasher; host: CodeHost; forwarder: Forwarder; tokens: TokenResolver; config: Config }) {
  const { store, host, config } = deps
  const pipelines = createPreconfiguredPipelines({ forwarder: deps.forwarder, vault: deps.tokens, runner: host, config })
  const cache = createProxyCache({
    bus: deps.bus,
    async load(keyHash) {
      const proxy = await store.proxies.findByKeyHash(keyHash)
      if (proxy === undefined) return undefined
      return { proxy, actor: await host.actor(proxy.tenant_id, proxy.application_id), service: pipelines.service(proxy) }
    },
  })
  const notFound = () => new AppError('not_found', { detail: 'No proxy with this id.' })

  async function find(tenantId: string, id: string): Promise<ProxyRecord> {
    const proxy = isUuid(id) ? await store.proxies.findById(tenantId, id) : undefined
    if (!proxy) throw notFound()
    return proxy
  }

  /**
   * Everything a call would trip over is checked on save: destination, Application, code, plugin
   * configs. The bound Application acts for the transforms' code and, without require_auth, for
   * whoever holds the proxy key: its grants must be within the caller's own.
   */
  async function prepare(caller: Principal, input: ProxyInput): Promise<void> {
    const errors: FieldErrors = {}
    const destinationError = checkDestination(input.destination_url)
    if (destinationError) errors.destination_url = [destinationError]
    if (!input.application && input.require_auth === false) errors.application = ['is required when require_auth is false']
    const pieces = KINDS.flatMap((kind): CodePiece[] => {
      const code = codeOf(input, kind)
      return code === null ? [] : [{ code, field: `${kind}_transform.code`, label: `${kind}_transform` }]
    })
    await host.check(caller, { pieces, application: input.application }, errors)
  }

  function checkDestination(url: string): string | undefined {
    try {
      buildDestination(url, '', '', config.proxy)
      return undefined
    } catch (err) {
      if (!(err instanceof AppError)) throw err
      return err.code === 'destination_refused' ? (err.detail ?? err.title) : 'must be an absolute https URL'
    }
  }

  /** The plugin configs of the proxy as it will be saved, validated now rather than on its first call. */
  function validatePlugins(record: ProxyRecord): void {
    try {
      pipelines.pipeline(record)
    } catch (err) {
      throw new ValidationError({ body: [(err as Error).message] })
    }
  }

  function fields(caller: Principal, input: ProxyInput) {
    return {
      name: input.name,
      destination_url: input.destination_url,
      request_transform_code: codeOf(input, 'request'),
      response_transform_code: codeOf(input, 'response'),
      configuration: input.configuration ?? {},
      application_id: input.application?.id ?? null,
      require_auth: input.require_auth ?? true,
      ...changeStamp(caller),
    }
  }

  function retireChanged(before: ProxyRecord, after: ProxyRecord | undefined): void {
    for (const kind of KINDS) {
      const field = kind === 'request' ? 'request_transform_code' : 'response_transform_code'
      if (after === undefined || before[field] !== after[field]) host.retire(transformReactorId(before.id, kind))
    }
  }

  return {
    async createProxy(caller: Principal, input: ProxyInput): Promise<ProxyWithKey> {
      await prepare(caller, input)
      const key = newApiKey('proxy')
      const stamp = newRecordStamp(caller)
      const proxy: ProxyRecord = {
        ...fields(caller, input),
        ...stamp,
        key_hash: deps.hasher.hash(key),
        version: host.version(codeList(input)),
      }
      validatePlugins(proxy)
      await store.proxies.insert(proxy)
      return { proxy, key }
    },

    getProxy: (tenantId: string, id: string) => find(tenantId, id),

    listProxies: (tenantId: string, page: number, size: number): Promise<Page<ProxyRecord>> => store.proxies.list(tenantId, page, size),

    async updateProxy(caller: Principal, id: string, input: ProxyInput): Promise<ProxyRecord> {
      const current = await find(caller.tenantId, id)
      await host.authorizeBound(caller, current.application_id)
      await prepare(caller, input)
      const patch = { ...fields(caller, input), version: host.version(codeList(input), { code: codeList(current), version: current.version }) }
      validatePlugins({ ...current, ...patch })
      const updated = await store.proxies.update(caller.tenantId, id, patch)
      await cache.invalidate(current.key_hash)
      if (!updated) throw notFound()
      retireChanged(current, updated)
      return updated
    },

    async deleteProxy(caller: Principal, id: string): Promise<void> {
      const current = await find(caller.tenantId, id)
      await host.authorizeBound(caller, current.application_id)
      const deleted = await store.proxies.delete(caller.tenantId, id)
      await cache.invalidate(current.key_hash)
      if (!deleted) throw notFound()
      retireChanged(current, undefined)
    },

    /** The proxy a SVC-PROXY-KEY names, in any tenant; undefined when none. No database round trip once cached. */
    async resolveKey(key: string): Promise<ResolvedProxy | undefined> {
      if (!looksLikeKey(key)) return undefined
      return cache.get(deps.hasher.hash(key))
    },

    start: () => cache.start(),
  }
}

export type PreconfiguredProxiesService = ReturnType<typeof preconfiguredProxiesService>

function codeOf(input: ProxyInput, kind: TransformKind): string | null {
  return (kind === 'request' ? input.request_transform : input.response_transform)?.code ?? null
}

/** A proxy's code in the order the code host compares versions by. */
function codeList(proxy: ProxyInput | ProxyRecord): CodeList {
  if ('request_transform_code' in proxy) return [proxy.request_transform_code, proxy.response_transform_code]
  return KINDS.map((kind) => codeOf(proxy, kind))
}
