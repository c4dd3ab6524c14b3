import type { IncomingMessage, ServerResponse } from 'node:http'
import { Readable } from 'node:stream'
import type { Middleware } from 'koa'
import type { Authenticator } from '../../auth/authenticator.js'
import { authorizeEphemeralProxy, preconfiguredProxyPrincipal, unknownProxyKey, withinSaver } from '../../auth/policies.js'
import type { Principal } from '../../auth/principal.js'
import type { AuditRecorder } from '../../audit/audit-log.js'
import type { Clock } from '../../clock.js'
import { AppError, type Problem } from '../../errors/index.js'
import type { ResolvedProxy } from '../../proxies/service.js'
import { discardBody } from '../../egress/body.js'
import { type Caller, type ProxyResult, type ProxyService } from '../../proxy/service.js'
import type { TenantSettingsCache } from '../../tenants/settings-cache.js'
import type { AppContext, AppState } from '../context.js'
import { authenticate, currentPrincipal } from '../middleware/authenticate.js'
import { readRaw } from '../middleware/json-body.js'
import { contentCoding } from '../../egress/headers.js'
import { bodyKind } from '../../proxy/plugins/detokenize/body-templates.js'
import type { BodyBudget } from '../body-budget.js'
import { jsonValuesExceed, tooManyValues } from '../json-values.js'
import { ProxyCallAudit } from '../proxy-audit.js'

export interface ProxyRouteDeps {
  authenticator: Authenticator
  proxy: ProxyService
  /** Pre-configured proxies by SVC-PROXY-KEY. */
  proxies: { resolveKey(key: string): Promise<ResolvedProxy | undefined>; again(found: ResolvedProxy): Promise<ResolvedProxy | undefined> }
  tenantSettings: TenantSettingsCache
  bodyLimitBytes: number
  /** Most JSON values in a body declared JSON (SVC_BODY_MAX_JSON_VALUES). */
  bodyMaxJsonValues: number
  /** The app's budget of body bytes being received at once. */
  bodyBudget: BodyBudget
  audit: AuditRecorder
  /** Whether the Application a proxy key acts as has expired. */
  clock: Clock
}

export const PROXY_METHODS = ['POST', 'GET', 'PUT', 'PATCH', 'DELETE'] as const
const METHODS = new Set<string>(PROXY_METHODS)
export const PROXY_PREFIX = '/proxy'
const PREFIX = PROXY_PREFIX
const EMPTY = Buffer.alloc(0)
const wrapProxyError = (problem: Problem) => ({ proxy_error: problem })

/**
 * `/proxy` and `/proxy/<path>` at any depth, for the five methods. A plain middleware rather
 * than a router: it is the hot path, and it must claim the request (so that every failure,
 * authentication included, renders as `proxy_error`) before anything else can answer.
 */
export function proxyRoute(deps: ProxyRouteDeps): Middleware<AppState> {
  const auth = authenticate(deps.authenticator)
  return (ctx, next) => {
    const path = ctx.path
    if (!path.startsWith(PREFIX) || (path.length > PREFIX.length && path[PREFIX.length] !== '/')) return next()
    ctx.state.wrapProblem = wrapProxyError
    if (!METHODS.has(ctx.method)) throw new AppError('method_not_allowed', { headers: { Allow: [...METHODS].join(', ') } })
    // What a refusal's entry names: both kinds detokenize under token:use (auth/policies.ts).
    ctx.state.permission = 'token:use'
    const proxyKey = ctx.get('svc-proxy-key')
    if (proxyKey !== '') return handlePreconfigured(ctx as AppContext, deps, proxyKey)
    return auth(ctx, () => handleProxy(ctx as AppContext, deps))
  }
}

async function handleProxy(ctx: AppContext, deps: ProxyRouteDeps): Promise<void> {
  return holdingBody((held) => proxyCall(ctx, deps, held))
}

async function proxyCall(ctx: AppContext, deps: ProxyRouteDeps, held: Promise<void>): Promise<void> {
  const allowed = (principal: Principal) => authorizeEphemeralProxy(principal, async (tenantId) => (await deps.tenantSettings.get(tenantId)).ephemeral_proxy_enabled)
  await allowed(currentPrincipal(ctx.state))
  const path = ctx.path.slice(PREFIX.length)
  const query = ctx.querystring
  const destination = deps.proxy.destination(ctx.get('svc-proxy-url') || undefined, path, query)
  const body = await readBody(ctx, deps, held)
  // Again once the body is in (it may follow the headers by up to the request time-out): a key
  // revoked or narrowed meanwhile must not detokenize a body chosen after the change.
  const principal = (ctx.state.principal = await deps.authenticator.again(currentPrincipal(ctx.state)))
  await allowed(principal)
  const audit = new ProxyCallAudit(ctx, deps.audit, destination, undefined)
  const result = await deps.proxy.call({ principal, method: ctx.method, destination, path, query, headers: ctx.req.rawHeaders, body, caller: new CallerLink(ctx), audit }).catch(auditFailure(audit))
  sendAudited(ctx, result, audit)
}

/**
 * A pre-configured proxy: its destination (SVC-PROXY-URL is ignored), its plugin list, and the
 * tenant's `ephemeral_proxy_enabled` does not apply. Resolving the key costs no database round
 * trip once the proxy is cached. Who detokenizes is decided in auth/policies.ts.
 */
async function handlePreconfigured(ctx: AppContext, deps: ProxyRouteDeps, proxyKey: string): Promise<void> {
  return holdingBody((held) => preconfiguredCall(ctx, deps, proxyKey, held))
}

async function preconfiguredCall(ctx: AppContext, deps: ProxyRouteDeps, proxyKey: string, held: Promise<void>): Promise<void> {
  const first = await resolvePreconfigured(ctx, deps.proxies.resolveKey(proxyKey), (apiKey) => deps.authenticator.authenticate(apiKey), deps.clock())
  const body = await readBody(ctx, deps, held)
  // Again once the body is in (see handleProxy): the proxy (its destination too), its
  // Application or the caller's key may have been changed or deleted meanwhile. Cache hits by
  // the hashes the first resolve made when nothing changed.
  const { found, principal } = await resolvePreconfigured(
    ctx,
    deps.proxies.again(first.found),
    (apiKey) => (first.caller ? deps.authenticator.again(first.caller) : deps.authenticator.authenticate(apiKey)),
    deps.clock(),
  )
  const { proxy, actor, service } = found
  const path = ctx.path.slice(PREFIX.length)
  const query = ctx.querystring
  const destination = service.destination(proxy.destination_url, path, query)
  const audit = new ProxyCallAudit(ctx, deps.audit, destination, proxy.id)
  const result = await service.call({ principal, actor, method: ctx.method, destination, path, query, headers: ctx.req.rawHeaders, body, caller: new CallerLink(ctx), audit }).catch(auditFailure(audit))
  sendAudited(ctx, result, audit)
}

/** The proxy a key names and who acts through it, or the refusal (401/403). `authenticate` resolves the caller's SVC-API-KEY. */
async function resolvePreconfigured(ctx: AppContext, resolving: Promise<ResolvedProxy | undefined>, authenticate: (apiKey: string | undefined) => Promise<Principal>, now: number) {
  const apiKey = ctx.get('svc-api-key') || undefined
  const found = await resolving
  // An authenticated caller is the actor of a refusal too (auth.denied in its tenant's chain).
  if (found === undefined) {
    if (apiKey !== undefined) ctx.state.principal = await authenticate(apiKey)
    throw unknownProxyKey(apiKey !== undefined)
  }
  ctx.state.refused = { tenantId: found.proxy.tenant_id, type: 'proxy', id: found.proxy.id }
  if (!found.proxy.require_auth) ctx.state.auditActor = { tenantId: found.proxy.tenant_id, kind: 'proxy', id: found.proxy.id }
  const caller = found.proxy.require_auth ? await authenticate(apiKey) : undefined
  if (caller !== undefined) ctx.state.principal = caller
  const principal = preconfiguredProxyPrincipal(found.proxy, found.actor, caller && withinSaver(caller, found.saver, now), now)
  ctx.state.principal = principal
  return { found, caller, principal }
}

const auditFailure = (audit: ProxyCallAudit) => (err: unknown): never => {
  audit.failed(err)
  throw err
}

function sendAudited(ctx: AppContext, result: ProxyResult, audit: ProxyCallAudit): void {
  try {
    sendResult(ctx, result)
  } catch (err) {
    audit.failed(err)
    throw err
  }
  // The call ends when its answer has gone out, or was cut (a destination that reset mid-body,
  // a caller that left, the shutdown deadline): such an answer is not a success.
  const res = ctx.res
  const end = () => audit.ended(result.status, result.destinationStatus, res.writableFinished)
  if (res.closed) end()
  else res.once('close', end)
}

/**
 * A body stays charged to the app's body budget while the call runs (the destination may take its
 * time), and goes back when the handler is done with it, answered or failed: not when a caller
 * that stopped reading a large answer lets it close, which could be never.
 */
async function holdingBody(call: (held: Promise<void>) => Promise<void>): Promise<void> {
  let done = () => {}
  const held = new Promise<void>((resolve) => (done = resolve))
  try {
    await call(held)
  } finally {
    done()
  }
}

// Without Content-Length or Transfer-Encoding an HTTP/1.1 request has no body (RFC 9112 6.3).
function readBody(ctx: AppContext, deps: ProxyRouteDeps, held: Promise<void>): Promise<Buffer> | Buffer {
  const length = ctx.req.headers['content-length']
  if (ctx.req.headers['transfer-encoding'] === undefined && (length === undefined || length === '0')) return EMPTY
  return readRaw(ctx.req, deps.bodyLimitBytes, deps.bodyBudget, { coded: 'forwarded', heldUntil: held }).then((body) => {
    refuseManyJsonValues(ctx.req, body, deps.bodyMaxJsonValues)
    return body
  })
}

/** A body declared JSON is parsed by the detokenizer and by request transforms (and again in their isolate). */
function refuseManyJsonValues(req: IncomingMessage, body: Buffer, max: number): void {
  if (bodyKind(req.headers['content-type']) !== 'json' || contentCoding(req.headers['content-encoding']) !== undefined) return
  if (jsonValuesExceed(body, max)) throw tooManyValues(max)
}

/**
 * The caller's AbortSignal, made only when a plugin asks for it: an AbortSignal with a listener
 * costs the hot path more than everything else the proxy adds, so the forward itself goes
 * without one (a caller who leaves early still frees the destination's connection once it
 * answers or times out, see sendResult).
 */
class CallerLink implements Caller {
  private controller: AbortController | undefined

  constructor(private readonly ctx: AppContext) {}

  get signal(): AbortSignal {
    if (this.controller === undefined) {
      const made = (this.controller = new AbortController())
      const res = this.ctx.res
      if (!this.ctx.writable) made.abort()
      else res.once('close', () => res.writableFinished || made.abort())
    }
    return this.controller.signal
  }
}

/**
 * Writes the answer ourselves instead of through Koa: Koa leaves a response hanging when a piped
 * body fails after the headers, while `relay` destroys it, so a destination that resets
 * mid-body aborts the caller's response instead of ending it as a clean, truncated one.
 */
function sendResult(ctx: AppContext, result: ProxyResult): void {
  const res = ctx.res
  if (!ctx.writable) {
    // The caller left while the destination answered: nobody to relay to.
    if (result.body instanceof Readable) discardBody(result.body)
    ctx.respond = false
    return
  }
  // The service's own signal: set only when the destination answered, never taken from a transform.
  if (result.destinationStatus !== undefined) res.setHeader('SVC-PROXY-DESTINATION-STATUS', String(result.destinationStatus))
  else res.removeHeader('SVC-PROXY-DESTINATION-STATUS')
  // Tessera's RateLimit-* fields describe its own limiter and go out as one set (README): the
  // destination's would replace some of them and leave a mixed set. Its CORS fields answer the
  // preflight Tessera answered: the destination's policy is not the one the browser asked.
  const ownLimits = res.hasHeader('ratelimit-limit')
  const ownCors = res.hasHeader('access-control-allow-origin')
  // With CORS on, every answer depends on Origin (a listed one gets Tessera's fields, others the
  // destination's): the destination's Vary is added to, or a shared cache mixes them up.
  const byOrigin = /\borigin\b/i.test(String(res.getHeader('vary') ?? ''))
  const relayed = (name: string) => !(ownLimits && name.startsWith('ratelimit')) && !(ownCors && name.startsWith('access-control-'))
  try {
    for (const name in result.headers) if (relayed(name)) res.setHeader(name, result.headers[name] as string | string[])
    if (byOrigin) ctx.vary('Origin')
    res.writeHead(result.status)
  } catch (cause) {
    // Nothing was sent yet: the error handler answers, without the destination's headers.
    if (result.body instanceof Readable) discardBody(result.body)
    for (const name in result.headers) if (relayed(name)) res.removeHeader(name)
    if (byOrigin) ctx.vary('Origin')
    res.removeHeader('SVC-PROXY-DESTINATION-STATUS')
    res.setHeader('Cache-Control', 'no-store') // the destination's, if it sent one, went with the rest
    throw new AppError('destination_unreachable', { detail: 'The destination answered with a header or status that cannot be relayed.', cause })
  }
  ctx.respond = false
  if (result.body instanceof Readable) relay(result.body, res)
  else res.end(result.body)
}

/** Not stream.pipeline: it costs an AbortController and a DOMException per call on this hot path. */
function relay(body: Readable, res: ServerResponse): void {
  // Failed before we got to it (an after-forward plugin held it): nothing valid can follow the headers.
  if (body.destroyed) return void res.destroy()
  // Destroying `res` (not ending it) is what makes the caller see an aborted response.
  body.once('error', () => res.destroy())
  res.once('close', () => res.writableFinished || body.destroy())
  body.pipe(res)
}
