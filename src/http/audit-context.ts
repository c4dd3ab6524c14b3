import { isIP } from 'node:net'
import type { ParameterizedContext } from 'koa'
import { httpMethods, UNATTRIBUTED_TENANT, type AuditEvent, type HttpMethod } from '../audit/events.js'
import { ROUTE_TEMPLATE } from '../audit/validate-event.js'
import type { AppState } from './context.js'

/** The fields every audit event of one request shares. */
export type RequestAudit = Pick<AuditEvent, 'tenantId' | 'actor' | 'traceId' | 'clientIp' | 'request'>

/**
 * Who, from where, through which route: spread into each event of the request, e.g.
 * `audit.record([{ ...requestAudit(ctx), action: 'token.read', target: { type: 'token', ids: [id] }, transform, outcome: 'success', status: 200 }])`.
 * Before authentication (or when it failed) the actor is anonymous and the event goes to the
 * unattributed chain.
 */
export function requestAudit(ctx: ParameterizedContext<AppState>): RequestAudit {
  const principal = ctx.state.principal
  const ip = ctx.state.clientIp
  const route = (ctx as { _matchedRoute?: unknown })._matchedRoute
  const method = ctx.method as HttpMethod
  return {
    tenantId: principal?.tenantId ?? UNATTRIBUTED_TENANT,
    actor: principal ? { kind: principal.kind, id: principal.id } : { kind: 'anonymous', id: null },
    traceId: ctx.state.traceId ?? null,
    clientIp: ip !== undefined && isIP(ip) !== 0 ? ip : null,
    ...(typeof route === 'string' && ROUTE_TEMPLATE.test(route) && httpMethods.includes(method) ? { request: { method, route } } : {}),
  }
}
