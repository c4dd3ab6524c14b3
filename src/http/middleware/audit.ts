import type { Middleware } from 'koa'
import type { AuditRecorder } from '../../audit/audit-log.js'
import { AppError } from '../../errors/index.js'
import { createClientIpResolver } from '../../ratelimit/index.js'
import { auditEvent } from '../audit-context.js'
import type { AppState } from '../context.js'

/**
 * Puts the caller's address on `ctx.state.clientIp` (resolved as the rate limiter does) for the
 * request's audit events, and turns every 401 into an `auth.failed` event and every 403 into an
 * `auth.denied` one, whichever stage refused (authentication, a permission check, a tenant
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
      if (err instanceof AppError && (err.status === 401 || err.status === 403)) {
        audit.note([auditEvent(ctx, { action: err.status === 401 ? 'auth.failed' : 'auth.denied', outcome: 'denied', status: err.status })])
      }
      throw err
    }
  }
}
