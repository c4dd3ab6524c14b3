import { actingApplication } from '../auth/policies.js'
import type { Principal } from '../auth/principal.js'
import type { Clock } from '../clock.js'
import type { Config } from '../config/index.js'
import { httpMethods, type HttpMethod } from '../audit/events.js'
import { AppError } from '../errors/index.js'
import { readBounded } from '../egress/body.js'
import { buildDestination } from '../egress/destination-url.js'
import type { Forwarder } from '../egress/forward.js'
import type { Store } from '../store/index.js'
import type { TokenService } from '../vault/token-service.js'
import { detokenizeValue, tokenizeValue, type TokensCreatedHook } from '../vault/tokenize.js'
import type { VaultKeys } from '../vault/vault-keys.js'
import type { HostBridges } from './supervisor.js'

/** What every bridge call of one invocation acts as: the Reactor's own Application. */
export interface InvocationContext {
  actor: Principal | undefined
  /**
   * `actor` as it is now, within its binder's grants as they are now (the code host's cached
   * lookups by id): each bridge call that acts on data acts with it, so an Application (or its
   * binder) deleted or narrowed during the invocation stops acting, or acts narrower, from that
   * instant. Undefined: `actor` as it was when the invocation began.
   */
  current?: (() => Promise<Principal | undefined>) | undefined
  /**
   * The Application that bound the code to `actor` (its `bound_by`): `current` acts within that
   * Application's grants as they are now. Null or undefined: not bounded (see CodeHost.actor).
   */
  boundBy?: string | null | undefined
  /** Awaited before a bridge hands the running code plaintext (`reactor.token_read`, fail-closed). */
  tokenRead?: ((tokenIds: ReadonlySet<string>) => Promise<void>) | undefined
  /** Awaited after a bridge created tokens and before the code gets them (`token.create`, fail-closed). */
  tokensCreated?: TokensCreatedHook | undefined
  /** A bridge call was refused (401, 403): noted as `auth.denied`, whether or not the code catches it. */
  denied?: ((status: number) => void) | undefined
  /** Awaited before `fetch` sends a byte (`reactor.fetch`, fail-closed): the code may hold plaintext. */
  fetching?: ((origin: string, method: string) => Promise<void>) | undefined
  /**
   * Told of each `tokenize` call as it starts: the invocation's answer waits for it, so tokens
   * code stored without awaiting them cannot end in a clean answer with no entry behind them.
   */
  changing?: ((call: Promise<unknown>) => void) | undefined
  /**
   * The failed audit write of an earlier bridge call, if any: every later bridge call fails with
   * it before it does anything (a tokenize stored its tokens and only then met the failure, so
   * they stood with no entry).
   */
  auditFailure?: (() => unknown) | undefined
}

/**
 * The host side of `req.svc.tokenize`, `req.svc.detokenize` and `fetch`. Each runs with the
 * Reactor's Application, never the caller, and `fetch` obeys the proxy's destination policy.
 */
export function reactorBridges(deps: {
  store: Store
  keys: VaultKeys
  tokens: TokenService
  forwarder: Forwarder
  config: Config
  present: (view: Parameters<Parameters<typeof tokenizeValue>[3]>[0]) => unknown
  clock: Clock
}): HostBridges {
  // Resolved at every bridge call: an Application that expired, was deleted or narrowed during a
  // long invocation stops acting (or acts narrower) at once. `fetch` touches no token and, as for
  // an unbound Reactor, needs no Application.
  const actor = async (ctx: InvocationContext): Promise<Principal> => actingApplication(ctx.current ? await ctx.current() : ctx.actor, 'Reactor', deps.clock())
  // The code may catch a refusal; the audit log still sees it.
  async function refusalsNoted<T>(ctx: InvocationContext, call: (actor: Principal) => Promise<T>): Promise<T> {
    refuseAfterAuditFailure(ctx)
    try {
      return await call(await actor(ctx))
    } catch (err) {
      if (err instanceof AppError && (err.status === 401 || err.status === 403)) ctx.denied?.(err.status)
      throw err
    }
  }
  return {
    tokenize(ctx, value) {
      const invocation = ctx as InvocationContext
      const call = refusalsNoted(invocation, (acting) => tokenizeValue(deps, acting, value, deps.present, undefined, invocation.tokensCreated))
      invocation.changing?.(call)
      return call
    },
    detokenize: (ctx, value) => refusalsNoted(ctx as InvocationContext, (acting) => detokenizeValue(deps.tokens, acting, value, deps.config.expressions.maxTokens, 'token:use', (ctx as InvocationContext).tokenRead)),
    async fetch(ctx, req, options = {}) {
      // Only methods an audit entry can name: with another one its `reactor.fetch` would have to
      // leave the destination out, and code could send data where the log cannot say.
      if (!httpMethods.includes(req.method as HttpMethod)) throw new AppError('bad_request', { detail: `fetch method must be one of ${httpMethods.join(', ')}.` })
      refuseAfterAuditFailure(ctx as InvocationContext)
      const destination = buildDestination(req.url, '', '', deps.config.proxy)
      await (ctx as InvocationContext).fetching?.(destination.origin, req.method)
      // The invocation may have ended while the audit entry was written: then nothing is sent.
      if (options.signal?.aborted) throw invocationEnded()
      const res = await deps.forwarder.forward({
        method: req.method,
        destination,
        headers: Object.entries(req.headers).flat(),
        body: req.body ?? null,
        signal: options.signal,
      })
      const limit = options.budget ?? { bytes: deps.config.reactors.payloadMaxBytes, detail: 'The fetched response is larger than the Reactor payload limit.' }
      const body = await readBounded(res.body, limit.bytes, limit.detail)
      const headers: Record<string, string> = {}
      for (const [name, value] of Object.entries(res.headers)) headers[name] = Array.isArray(value) ? value.join(', ') : value
      return { status: res.status, headers, body: body.toString('utf8') }
    },
  }
}

function refuseAfterAuditFailure(ctx: InvocationContext): void {
  const failure = ctx.auditFailure?.()
  if (failure !== undefined) throw failure
}

function invocationEnded(): AppError {
  return new AppError('reactor_error', { detail: 'The invocation has ended.' })
}
