import { actingApplication, assertActive, requireHeld, withinSaver } from '../auth/policies.js'
import type { Authenticator } from '../auth/authenticator.js'
import type { Principal } from '../auth/principal.js'
import type { Clock } from '../clock.js'
import type { Config } from '../config/index.js'
import { AppError } from '../errors/index.js'
import { isUuid } from '../shapes/ids.js'
import { changeStamp, newRecordStamp, type Page, type ReactorRecord, type Store } from '../store/index.js'
import type { TokenService, TokenView } from '../vault/token-service.js'
import { detokenizeValue, tokenizeValue } from '../vault/tokenize.js'
import type { VaultKeys } from '../vault/vault-keys.js'
import { binderOf, saveBound, type CodeDraft, type CodeHost, type ReactorOutcome } from './code-host.js'
import type { ReactorCache } from './reactor-cache.js'

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

export function reactorsService(deps: {
  store: Store
  keys: VaultKeys
  tokens: TokenService
  host: CodeHost
  config: Config
  present: (view: TokenView) => unknown
  /** Reactors and the Applications they act as, for `react`; management routes read the store. */
  cache: ReactorCache
  /** Whether the Application a Reactor acts as has expired. */
  clock: Clock
  /** The caller's key as it resolves when the answer is shaped (see currentCaller). */
  authenticator: Pick<Authenticator, 'current'>
}) {
  const { store, host, cache } = deps
  const notFound = () => new AppError('not_found', { detail: 'No Reactor with this id.' })

  async function find(tenantId: string, id: string): Promise<ReactorRecord> {
    const reactor = isUuid(id) ? await store.reactors.findById(tenantId, id) : undefined
    if (!reactor) throw notFound()
    return reactor
  }

  const draft = (input: ReactorInput): CodeDraft => ({ pieces: [{ code: input.code, field: 'code' }], application: input.application })

  /**
   * The caller as it is when the answer is shaped: the answer (and the tokens a `{ tokenize }`
   * answer shows or finds again) goes to it, so a caller deleted or narrowed during a call (up to
   * the time-out) gets only what it may have now: its key gone (the Application deleted, the key
   * regenerated or deleted), 401; expired or no longer a private token:use key, 403. The
   * authenticator's cached look-up of the key the call came with.
   */
  async function currentCaller(caller: Principal): Promise<Principal> {
    const now = await deps.authenticator.current(caller)
    if (now === undefined) throw new AppError('unauthenticated', { detail: 'The API key is no longer valid.' })
    requireHeld(now, 'token:use', ['private'])
    assertActive(now, deps.clock())
    return now
  }

  async function shape(outcome: ReactorOutcome, reactor: ReactorRecord, actor: Principal | undefined, caller: Principal, audit: ReactorAudit | undefined): Promise<ReactResult> {
    if (outcome.kind === 'response') return { kind: 'response', status: outcome.status, headers: outcome.headers, body: outcome.body }
    const value = outcome.value
    if (value === null || typeof value !== 'object' || Array.isArray(value)) return { kind: 'result', body: { raw: value } }
    const { raw, body, headers, tokenize } = value as Record<string, unknown>
    let tokens: unknown
    if (tokenize !== undefined) {
      // As at each bridge call: the Application as it is now, not as the invocation began.
      const acting = actingApplication(actor && (await host.actor(actor.tenantId, actor.id, reactor.bound_by)), 'Reactor', deps.clock())
      // The answer goes to the caller: it shows no more than both may read.
      tokens = await tokenizeValue(deps, acting, tokenize, deps.present, [acting, caller], audit?.tokensCreated)
    }
    return { kind: 'result', body: { raw, body, headers, tokens } }
  }

  return {
    async createReactor(caller: Principal, input: ReactorInput): Promise<ReactorRecord> {
      await host.check(caller, draft(input))
      const reactor: ReactorRecord = {
        ...newRecordStamp(caller),
        name: input.name,
        code: input.code,
        version: host.version([input.code]),
        configuration: input.configuration ?? {},
        application_id: input.application?.id ?? null,
        bound_by: binderOf(caller),
      }
      await saveBound(store.reactors.insert(reactor))
      return reactor
    },

    getReactor: (tenantId: string, id: string) => find(tenantId, id),

    listReactors: (tenantId: string, page: number, size: number): Promise<Page<ReactorRecord>> => store.reactors.list(tenantId, page, size),

    async updateReactor(caller: Principal, id: string, input: ReactorInput): Promise<ReactorRecord> {
      const current = await find(caller.tenantId, id)
      await host.authorizeBound(caller, current.application_id)
      await host.check(caller, draft(input))
      const updated = await saveBound(store.reactors.update(caller.tenantId, id, {
        name: input.name,
        code: input.code,
        version: host.version([input.code], { code: [current.code], version: current.version }),
        configuration: input.configuration ?? {},
        application_id: input.application?.id ?? null,
        bound_by: binderOf(caller),
        ...changeStamp(caller),
      }))
      // The stored id, not the one asked with: uuids match in any case, cache keys only in one.
      await cache.invalidate(current.tenant_id, current.id)
      if (!updated) throw notFound()
      return updated
    },

    async deleteReactor(caller: Principal, id: string): Promise<void> {
      const current = await find(caller.tenantId, id)
      await host.authorizeBound(caller, current.application_id)
      const deleted = await store.reactors.delete(caller.tenantId, id)
      await cache.invalidate(current.tenant_id, current.id)
      if (!deleted) throw notFound()
      host.retire(current.id)
    },

    /** `args` expressions are detokenized under the caller's rules before the code sees them. */
    async react(caller: Principal, id: string, args: unknown, audit?: ReactorAudit): Promise<ReactResult> {
      const cached = isUuid(id) ? await cache.get(caller.tenantId, id.toLowerCase()) : undefined
      if (!cached) throw notFound()
      const { reactor, actor } = cached
      // The code's saver chose where the args go: they reach no further than its grants either.
      const sender = withinSaver(caller, await host.saver(reactor.tenant_id, reactor.bound_by), deps.clock())
      const detokenized = await detokenizeValue(deps.tokens, sender, args, deps.config.expressions.maxTokens, 'token:use', audit?.invoking)
      const code = { tenantId: reactor.tenant_id, reactorId: reactor.id, version: reactor.version, code: reactor.code, configuration: reactor.configuration }
      const outcome = await host.invoke(code, detokenized, { actor, boundBy: reactor.bound_by, tokenRead: audit?.tokenRead, tokensCreated: audit?.tokensCreated, denied: audit?.denied, fetching: audit?.fetching })
      return shape(outcome, reactor, actor, await currentCaller(caller), audit)
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
  tokensCreated(tokenIds: string[], views: TokenView[], stored: boolean): Promise<void>
  /** A bridge call was refused (`auth.denied`, or `auth.failed` for an expired Application); noted, not awaited. */
  denied(status: number): void
  /** Before `fetch` sends anything (`reactor.fetch`). */
  fetching(origin: string, method: string): Promise<void>
}
