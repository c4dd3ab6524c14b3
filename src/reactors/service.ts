import { randomUUID } from 'node:crypto'
import { applicationPrincipal } from '../auth/application-lookup.js'
import { actingApplication, authorizeBinding } from '../auth/policies.js'
import type { Principal } from '../auth/principal.js'
import type { Config } from '../config/index.js'
import { AppError, ValidationError } from '../errors/index.js'
import type { Page, ReactorRecord, Store } from '../store/index.js'
import type { TokenService, TokenView } from '../vault/token-service.js'
import { detokenizeValue, tokenizeValue } from '../vault/tokenize.js'
import type { VaultKeys } from '../vault/vault-keys.js'
import type { InvocationContext } from './bridges.js'
import type { ReactorCache } from './reactor-cache.js'
import type { ReactorOutcome, ReactorSupervisor } from './supervisor.js'

export interface ReactorInput {
  name: string
  code: string
  configuration?: Record<string, string>
  application?: { id: string } | null
}

/** What `POST /reactors/{id}/react` answers, or the Reactor's own custom response. */
export type ReactResult =
  | { kind: 'result'; body: { raw?: unknown; body?: unknown; headers?: unknown; tokens?: unknown } }
  | { kind: 'response'; status: number; headers: Record<string, string>; body: unknown }

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

export function reactorsService(deps: {
  store: Store
  keys: VaultKeys
  tokens: TokenService
  supervisor: ReactorSupervisor
  config: Config
  present: (view: TokenView) => unknown
  /** Reactors and the Applications they act as, for `react`; management routes read the store. */
  cache: ReactorCache
}) {
  const { store, supervisor, cache } = deps

  async function find(tenantId: string, id: string): Promise<ReactorRecord> {
    const reactor = UUID.test(id) ? await store.reactors.findById(tenantId, id) : undefined
    if (!reactor) throw new AppError('not_found', { detail: 'No Reactor with this id.' })
    return reactor
  }

  /**
   * Code is compiled on save, so a syntax error is a 422 now rather than a failure at each call.
   * Whoever writes the code wields its Application, so binding one needs its grants within the
   * caller's own.
   */
  async function prepare(caller: Principal, input: ReactorInput): Promise<void> {
    if (input.code.length > deps.config.reactors.codeMaxChars) {
      throw ValidationError.field('code', `must be at most ${deps.config.reactors.codeMaxChars} characters`)
    }
    if (input.application) {
      const app = UUID.test(input.application.id) ? await store.applications.findById(caller.tenantId, input.application.id) : undefined
      if (!app) throw ValidationError.field('application.id', 'no Application with this id')
      authorizeBinding(caller, app)
    }
    await supervisor.compile(input.code)
  }

  /** Changing or removing code that acts as an Application needs that Application's grants within the caller's too. */
  async function authorizeBound(caller: Principal, reactor: ReactorRecord): Promise<void> {
    const app = reactor.application_id ? await store.applications.findById(caller.tenantId, reactor.application_id) : undefined
    authorizeBinding(caller, app, 'id')
  }

  async function shape(outcome: ReactorOutcome, actor: Principal | undefined, caller: Principal, audit: ReactorAudit | undefined): Promise<ReactResult> {
    if (outcome.kind === 'response') return { kind: 'response', status: outcome.status, headers: outcome.headers, body: outcome.body }
    const value = outcome.value
    if (value === null || typeof value !== 'object' || Array.isArray(value)) return { kind: 'result', body: { raw: value } }
    const { raw, body, headers, tokenize } = value as Record<string, unknown>
    let tokens: unknown
    if (tokenize !== undefined) {
      const acting = actingApplication(actor, 'Reactor')
      // The answer goes to the caller: it shows no more than both may read.
      tokens = await tokenizeValue(deps, acting, tokenize, deps.present, [acting, caller], audit?.tokensCreated)
    }
    return { kind: 'result', body: { raw, body, headers, tokens } }
  }

  return {
    async createReactor(caller: Principal, input: ReactorInput): Promise<ReactorRecord> {
      await prepare(caller, input)
      const now = new Date()
      const reactor: ReactorRecord = {
        id: randomUUID(),
        tenant_id: caller.tenantId,
        name: input.name,
        code: input.code,
        version: randomUUID(),
        configuration: input.configuration ?? {},
        application_id: input.application?.id ?? null,
        created_by: caller.id,
        created_at: now,
        modified_by: caller.id,
        modified_at: now,
      }
      await store.reactors.insert(reactor)
      return reactor
    },

    getReactor: (tenantId: string, id: string) => find(tenantId, id),

    listReactors: (tenantId: string, page: number, size: number): Promise<Page<ReactorRecord>> => store.reactors.list(tenantId, page, size),

    async updateReactor(caller: Principal, id: string, input: ReactorInput): Promise<ReactorRecord> {
      const current = await find(caller.tenantId, id)
      await authorizeBound(caller, current)
      await prepare(caller, input)
      const updated = await store.reactors.update(caller.tenantId, id, {
        name: input.name,
        code: input.code,
        // A new version makes the runtime drop warm isolates compiled from the old code.
        version: input.code === current.code ? current.version : randomUUID(),
        configuration: input.configuration ?? {},
        application_id: input.application?.id ?? null,
        modified_by: caller.id,
        modified_at: new Date(),
      })
      await cache.invalidate(id)
      if (!updated) throw new AppError('not_found', { detail: 'No Reactor with this id.' })
      return updated
    },

    async deleteReactor(caller: Principal, id: string): Promise<void> {
      await authorizeBound(caller, await find(caller.tenantId, id))
      if (!(await store.reactors.delete(caller.tenantId, id))) throw new AppError('not_found', { detail: 'No Reactor with this id.' })
      await cache.invalidate(id)
      supervisor.retire(id)
    },

    /** `args` expressions are detokenized under the caller's rules before the code sees them. */
    async react(caller: Principal, id: string, args: unknown, audit?: ReactorAudit): Promise<ReactResult> {
      const cached = UUID.test(id) ? await cache.get(caller.tenantId, id) : undefined
      if (!cached) throw new AppError('not_found', { detail: 'No Reactor with this id.' })
      const { reactor, actor } = cached
      const detokenized = await detokenizeValue(deps.tokens, caller, args, deps.config.expressions.maxTokens, 'token:use', audit?.invoking)
      const context: InvocationContext = { actor, tokenRead: audit?.tokenRead, tokensCreated: audit?.tokensCreated }
      const outcome = await supervisor.invoke({
        tenantId: reactor.tenant_id,
        reactorId: reactor.id,
        version: reactor.version,
        code: reactor.code,
        args: detokenized,
        configuration: reactor.configuration,
        context,
      })
      return shape(outcome, actor, caller, audit)
    },
  }
}

export type ReactorsService = ReturnType<typeof reactorsService>

/** The audit side of one invocation (http/routes/reactors.ts): each awaited, fail-closed. */
export interface ReactorAudit {
  /** Once the args' tokens are resolved, before the runtime gets the detokenized args (`reactor.invoke`). */
  invoking(tokenIds: ReadonlySet<string>): Promise<void>
  /** Before a bridge hands the running code plaintext (`reactor.token_read`). */
  tokenRead(tokenIds: ReadonlySet<string>): Promise<void>
  /** After `req.svc.tokenize` or a `{tokenize}` answer stored tokens, before anyone sees them (`token.create`). */
  tokensCreated(tokenIds: string[], views: TokenView[]): Promise<void>
}

/** Runs as the Reactor's Application: tokenize/detokenize bridges and `{tokenize}` results. */
export async function reactorActor(store: Store, reactor: ReactorRecord): Promise<Principal | undefined> {
  if (!reactor.application_id) return undefined
  const app = await store.applications.findById(reactor.tenant_id, reactor.application_id)
  return app ? applicationPrincipal(app) : undefined
}
