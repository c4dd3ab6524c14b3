import type { Middleware, ParameterizedContext } from 'koa'
import type { AuditRecorder } from '../../audit/audit-log.js'
import type { AuditEvent, TargetType } from '../../audit/events.js'
import { AppError } from '../../errors/index.js'
import { isUuid } from '../../shapes/ids.js'
import { createClientIpResolver } from '../../ratelimit/index.js'
import { auditEvent } from '../audit-context.js'
import type { AppState } from '../context.js'

/**
 * Puts the caller's address on `ctx.state.clientIp` (resolved as the rate limiter does) for the
 * request's audit events, and turns every 401 into an `auth.failed` event and every 403 into an
 * `auth.denied` one (see `refusal`), whichever stage refused (authentication, a permission check, a tenant
 * setting, the proxy). Refusals reveal nothing, so they take the cheap path: the answer does not
 * wait for the write. Placed inside the error handler, so it sees errors before they are answered.
 */
export function auditRequests(audit: AuditRecorder, trustedProxies: readonly string[]): Middleware<AppState> {
  const resolveClientIp = createClientIpResolver(trustedProxies)
  return async (ctx, next) => {
    ctx.state.clientIp = resolveClientIp(ctx.req.socket.remoteAddress, ctx.get('X-Forwarded-For') || undefined)
    try {
      await next()
    } catch (err) {
      if (err instanceof AppError && err.status === 401) audit.note([refusal(ctx, 'auth.failed', 401)])
      if (err instanceof AppError && err.status === 403) audit.note([refusal(ctx, 'auth.denied', 403)])
      throw err
    }
  }
}

/** The resources whose id in the path a refusal names (uuids only: a token id in a path could be anything a caller typed, card numbers included). */
const PATH_TARGETS: Readonly<Record<string, TargetType>> = { applications: 'application', reactors: 'reactor', proxies: 'proxy' }

/** Who, where, the permission the route checks and, for a management resource or a pre-configured proxy, which one. */
function refusal(ctx: ParameterizedContext<AppState>, action: 'auth.failed' | 'auth.denied', status: 401 | 403): AuditEvent {
  const event = auditEvent(ctx, { action, outcome: 'denied', status })
  if (ctx.state.permission) event.permission = ctx.state.permission
  const type = PATH_TARGETS[event.request?.route.split('/')[1] ?? '']
  const id = (ctx as { params?: Record<string, string | undefined> }).params?.id
  if (type && id !== undefined && isUuid(id)) event.target = { type, ids: [id.toLowerCase()] }
  else if (ctx.state.refused) event.target = { type: ctx.state.refused.type, ids: [ctx.state.refused.id] }
  return event
}
