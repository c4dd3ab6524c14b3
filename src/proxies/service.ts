import { randomUUID } from 'node:crypto'
import { applicationPrincipal } from '../auth/application-lookup.js'
import { looksLikeKey, newApiKey, type ApiKeyHasher } from '../auth/api-keys.js'
import { authorizeBinding } from '../auth/policies.js'
import type { Principal } from '../auth/principal.js'
import type { Config } from '../config/index.js'
import { AppError, ValidationError, type FieldErrors } from '../errors/index.js'
import { buildDestination } from '../egress/destination-url.js'
import type { Forwarder } from '../egress/forward.js'
import type { TokenResolver } from '../proxy/plugins/detokenize/index.js'
import type { TransformRunner } from '../proxy/plugins/transform/index.js'
import { createPreconfiguredProxies, transformReactorId, type TransformKind } from '../proxy/preconfigured-proxy.js'
import type { InvalidationBus } from '../cache/invalidation-bus.js'
import type { Page, ProxyRecord, Store } from '../store/index.js'
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

/** Compiles a transform: 422 on a syntax error (the ReactorSupervisor). */
export interface TransformCompiler extends TransformRunner {
  compile(code: string): Promise<void>
  retire(reactorId: string): void
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i
const KINDS: readonly TransformKind[] = ['request', 'response']

export function proxiesService(deps: { store: Store; bus: InvalidationBus; hasher: ApiKeyHasher; supervisor: TransformCompiler; forwarder: Forwarder; tokens: TokenResolver; config: Config }) {
  const { store, supervisor, config } = deps
  const proxies = createPreconfiguredProxies({ forwarder: deps.forwarder, vault: deps.tokens, runner: supervisor, config })
  const cache = createProxyCache({
    bus: deps.bus,
    async load(keyHash) {
      const proxy = await store.proxies.findByKeyHash(keyHash)
      if (proxy === undefined) return undefined
      const app = proxy.application_id ? await store.applications.findById(proxy.tenant_id, proxy.application_id) : undefined
      return { proxy, actor: app ? applicationPrincipal(app) : undefined, service: proxies.service(proxy) }
    },
  })

  async function find(tenantId: string, id: string): Promise<ProxyRecord> {
    const proxy = UUID.test(id) ? await store.proxies.findById(tenantId, id) : undefined
    if (!proxy) throw new AppError('not_found', { detail: 'No proxy with this id.' })
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
    for (const kind of KINDS) {
      const code = codeOf(input, kind)
      if (code !== null && code.length > config.reactors.codeMaxChars) errors[`${kind}_transform.code`] = [`must be at most ${config.reactors.codeMaxChars} characters`]
    }
    if (input.application) {
      const app = UUID.test(input.application.id) ? await store.applications.findById(caller.tenantId, input.application.id) : undefined
      if (!app) errors['application.id'] = ['no Application with this id']
    } else if (input.require_auth === false) {
      errors.application = ['is required when require_auth is false']
    }
    if (Object.keys(errors).length) throw new ValidationError(errors)
    if (input.application) authorizeBinding(caller, await store.applications.findById(caller.tenantId, input.application.id))
    for (const kind of KINDS) await compile(kind, codeOf(input, kind))
  }

  /** Changing or removing a proxy that acts as an Application needs that Application's grants within the caller's too. */
  async function authorizeBound(caller: Principal, proxy: ProxyRecord): Promise<void> {
    const app = proxy.application_id ? await store.applications.findById(caller.tenantId, proxy.application_id) : undefined
    authorizeBinding(caller, app, 'id')
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

  async function compile(kind: TransformKind, code: string | null): Promise<void> {
    if (code === null) return
    try {
      await supervisor.compile(code)
    } catch (err) {
      if (!(err instanceof AppError) || err.code !== 'reactor_compile') throw err
      const detail = err.detail ?? err.title
      throw new AppError('reactor_compile', { detail: `${kind}_transform: ${detail}`, errors: { [`${kind}_transform.code`]: [detail] }, cause: err })
    }
  }

  /** The plugin configs of the proxy as it will be saved, validated now rather than on its first call. */
  function validatePlugins(record: ProxyRecord): void {
    try {
      proxies.pipeline(record)
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
      modified_by: caller.id,
      modified_at: new Date(),
    }
  }

  function retireChanged(before: ProxyRecord, after: ProxyRecord | undefined): void {
    for (const kind of KINDS) {
      const field = kind === 'request' ? 'request_transform_code' : 'response_transform_code'
      if (after === undefined || before[field] !== after[field]) supervisor.retire(transformReactorId(before.id, kind))
    }
  }

  return {
    async createProxy(caller: Principal, input: ProxyInput): Promise<ProxyWithKey> {
      await prepare(caller, input)
      const key = newApiKey('proxy')
      const now = new Date()
      const proxy: ProxyRecord = {
        id: randomUUID(),
        tenant_id: caller.tenantId,
        key_hash: deps.hasher.hash(key),
        version: randomUUID(),
        created_by: caller.id,
        created_at: now,
        ...fields(caller, input),
        modified_at: now,
      }
      validatePlugins(proxy)
      await store.proxies.insert(proxy)
      return { proxy, key }
    },

    getProxy: (tenantId: string, id: string) => find(tenantId, id),

    listProxies: (tenantId: string, page: number, size: number): Promise<Page<ProxyRecord>> => store.proxies.list(tenantId, page, size),

    async updateProxy(caller: Principal, id: string, input: ProxyInput): Promise<ProxyRecord> {
      const current = await find(caller.tenantId, id)
      await authorizeBound(caller, current)
      await prepare(caller, input)
      const next = fields(caller, input)
      const sameCode = next.request_transform_code === current.request_transform_code && next.response_transform_code === current.response_transform_code
      // A new version makes the runtime drop warm isolates compiled from the old code.
      const patch = { ...next, version: sameCode ? current.version : randomUUID() }
      validatePlugins({ ...current, ...patch })
      const updated = await store.proxies.update(caller.tenantId, id, patch)
      if (!updated) throw new AppError('not_found', { detail: 'No proxy with this id.' })
      await cache.invalidate(current.key_hash)
      retireChanged(current, updated)
      return updated
    },

    async deleteProxy(caller: Principal, id: string): Promise<void> {
      const current = await find(caller.tenantId, id)
      await authorizeBound(caller, current)
      if (!(await store.proxies.delete(caller.tenantId, id))) throw new AppError('not_found', { detail: 'No proxy with this id.' })
      await cache.invalidate(current.key_hash)
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

export type ProxiesService = ReturnType<typeof proxiesService>

function codeOf(input: ProxyInput, kind: TransformKind): string | null {
  return (kind === 'request' ? input.request_transform : input.response_transform)?.code ?? null
}
