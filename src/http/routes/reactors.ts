import { randomUUID } from 'node:crypto'
import { performance } from 'node:perf_hooks'
import type { AuditRecorder } from '../../audit/audit-log.js'
import { outcomeOf } from '../../audit/events.js'
import { AppError } from '../../errors/index.js'
import { isAnswerHeader, isAnswerStatus, isHeaderName, isHeaderValue } from '../../shapes/http-parts.js'
import type { ReactResult, ReactorAudit, ReactorsService } from '../../reactors/service.js'
import { auditEvent, fetchEvent, requestAudit, tokenEvent } from '../audit-context.js'
import type { AppContext } from '../context.js'
import type { AppRouter } from '../context.js'
import { currentPrincipal, requirePermission } from '../middleware/authenticate.js'
import { presentReactor, presentReactResult } from '../presenters/reactors.js'
import { ListReactorsQuery, ReactBody, ReactorBody } from '../schemas/reactors.js'
import { validator } from '../schemas/validate.js'
import type { BodyParsers } from './body-parsers.js'
import { resourceRoutes } from './resource-routes.js'

const parseReactor = validator(ReactorBody)
const parseReact = validator(ReactBody)
const parseList = validator(ListReactorsQuery, { query: true })

export function reactorRoutes(router: AppRouter, reactors: ReactorsService, audit: AuditRecorder, body: BodyParsers): void {
  resourceRoutes(router, audit, body, {
    type: 'reactor',
    path: '/reactors',
    parseCreate: parseReactor,
    parseUpdate: parseReactor,
    parseList,
    present: presentReactor,
    create: async (caller, input) => ({ record: await reactors.createReactor(caller, input) }),
    list: (tenantId, q) => reactors.listReactors(tenantId, q.page, q.size),
    get: reactors.getReactor,
    update: reactors.updateReactor,
    delete: reactors.deleteReactor,
  })

  // The payload limit is enforced while reading the body: 413 before any isolate is touched.
  router.post('/reactors/:id/react', requirePermission('token:use', ['private']), body.payload, async (ctx) => {
    const { args } = parseReact(ctx.state.body)
    const invocation = reactorAudit(ctx, audit, ctx.params.id!)
    try {
      const result = await reactors.react(currentPrincipal(ctx.state), ctx.params.id!, args, invocation)
      if (result.kind === 'response') respondAsReactor(ctx, result)
      else ctx.body = presentReactResult(result)
    } catch (err) {
      invocation.ended(err instanceof AppError ? err.status : 500)
      throw err
    }
    invocation.ended(ctx.status)
  })
}

/**
 * `reactor.invoke` before the runtime gets the detokenized args, `reactor.token_read` before
 * each bridge call that hands the code plaintext, and `token.create` for the tokens the code
 * stores (`req.svc.tokenize`, a `{tokenize}` answer) before it or the caller sees them; all
 * fail-closed, the later ones naming the invocation's entry as `parentId` (args without tokens
 * reveal nothing: their `reactor.invoke` is only noted). Status 200 there means "authorized,
 * running". A `fetch` of the code is `reactor.fetch` (origin, method), recorded before it sends
 * anything. Noted under the invocation too: a refused bridge call (`auth.denied`, or
 * `auth.failed` for an expired Application) and, when it ends, `reactor.result` with the
 * caller's status and the duration.
 */
function reactorAudit(ctx: AppContext, recorder: AuditRecorder, reactorId: string): ReactorAudit & { ended(status: number): void } {
  const id = randomUUID()
  const target = { type: 'reactor' as const, ids: [reactorId] }
  let started: number | undefined
  return {
    invoking: async (tokenIds) => {
      const invoke = auditEvent(ctx, { id, action: 'reactor.invoke', target, tokenIds: [...tokenIds], outcome: 'success', status: 200 })
      if (tokenIds.size > 0) await recorder.record([invoke])
      else recorder.note([invoke])
      started = performance.now()
    },
    /** The invocation's end, once it began: `reactor.result` with what the caller got. */
    ended: (status) => {
      if (started === undefined) return
      const durationMs = Math.round(performance.now() - started)
      recorder.note([auditEvent(ctx, { action: 'reactor.result', target, parentId: id, outcome: outcomeOf(status), status, durationMs })])
    },
    tokenRead: (tokenIds) => recorder.record([auditEvent(ctx, { action: 'reactor.token_read', target, tokenIds: [...tokenIds], parentId: id, outcome: 'success', status: 200 })]),
    tokensCreated: (tokenIds, views, stored) => recorder.record([Object.assign(tokenEvent(ctx, 'token.create', tokenIds, 200, views, stored), { parentId: id })]),
    fetching: (origin, method) => recorder.record([fetchEvent(requestAudit(ctx), target, id, origin, method)]),
    denied: (status) => recorder.note([auditEvent(ctx, { action: status === 401 ? 'auth.failed' : 'auth.denied', target, parentId: id, outcome: 'denied', status })]),
  }
}

/** A CustomHttpResponseError from Reactor code: its status, headers and body, checked first. */
function respondAsReactor(ctx: AppContext, result: Extract<ReactResult, { kind: 'response' }>): void {
  if (!isAnswerStatus(result.status)) {
    throw new AppError('reactor_error', { detail: 'The Reactor answered with an invalid HTTP status.' })
  }
  for (const [name, value] of Object.entries(result.headers)) {
    if (!isHeaderName(name) || typeof value !== 'string' || !isHeaderValue(value)) {
      throw new AppError('reactor_error', { detail: 'The Reactor answered with an invalid header.' })
    }
  }
  ctx.status = result.status
  for (const [name, value] of Object.entries(result.headers)) {
    const lowerName = name.toLowerCase()
    // Added to what Tessera set (`Origin`, with CORS on), as given: ctx.vary would throw on a field it cannot parse.
    if (lowerName === 'vary') ctx.set('Vary', [ctx.response.get('Vary'), value].filter(Boolean).join(', '))
    else if (isReactorAnswerHeader(lowerName)) ctx.set(name, value)
  }
  ctx.body = result.body === undefined || result.body === null ? '' : result.body
}

/**
 * Reactor code may set any answer header but Tessera's own: not `Cache-Control` (an answer built
 * from revealed data stays `no-store`; code copying an upstream answer's headers made it
 * cacheable), nor the `RateLimit-*` fields, which describe Tessera's limiter as one set, nor
 * the CORS fields, which answer the preflight Tessera answered (`Vary` is added to, not replaced).
 */
function isReactorAnswerHeader(lowerName: string): boolean {
  return isAnswerHeader(lowerName) && lowerName !== 'cache-control' && !lowerName.startsWith('ratelimit') && !lowerName.startsWith('access-control-') && lowerName !== 'vary'
}
