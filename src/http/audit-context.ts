import { isIP } from 'node:net'
import type { ParameterizedContext } from 'koa'
import { httpMethods, isChangeAction, UNATTRIBUTED_TENANT, type AuditAction, type AuditEvent, type HttpMethod, type TargetType, type Transform } from '../audit/events.js'
import { ROUTE_TEMPLATE } from '../audit/validate-event.js'
import type { AppState } from './context.js'
import { matchedRoute } from './matched-route.js'

/** The fields every audit event of one request shares. */
export type RequestAudit = Pick<AuditEvent, 'tenantId' | 'actor' | 'traceId' | 'clientIp' | 'request'>

/**
 * Who, from where, through which route: the fields every event of the request shares (see
 * `auditEvent`). Before authentication (or when it failed) the actor is anonymous and the event
 * goes to the unattributed chain.
 */
export function requestAudit(ctx: ParameterizedContext<AppState>): RequestAudit {
  const principal = ctx.state.principal
  const acting = ctx.state.auditActor
  const ip = ctx.state.clientIp
  const route = matchedRoute(ctx)
  const method = ctx.method as HttpMethod
  const shared: RequestAudit = {
    tenantId: acting?.tenantId ?? principal?.tenantId ?? ctx.state.refused?.tenantId ?? UNATTRIBUTED_TENANT,
    actor: acting ? { kind: acting.kind, id: acting.id } : principal ? { kind: principal.kind, id: principal.id } : { kind: 'anonymous', id: null },
    traceId: ctx.state.traceId ?? null,
    clientIp: ip !== undefined && isIP(ip) !== 0 ? ip : null,
  }
  if (route !== undefined && ROUTE_TEMPLATE.test(route) && httpMethods.includes(method)) shared.request = { method, route }
  return shared
}

/** What an event adds to its request's shared fields. */
export type EventFields = Omit<AuditEvent, keyof RequestAudit> & Partial<RequestAudit>

/**
 * One event of this request: its shared fields (`requestAudit`) and `fields`, which win, e.g.
 * `audit.record([auditEvent(ctx, { action: 'token.read', target: { type: 'token', ids: [id] }, transform, outcome: 'success', status: 200 })])`.
 * Built with Object.assign, not `{ ...shared, ...fields }`: on Node 20 a spread followed by more
 * properties takes V8's slow path, about 2 µs per event against 0.06 µs (measured), on every
 * audited request.
 */
export function auditEvent(ctx: ParameterizedContext<AppState>, fields: EventFields, changed = true): AuditEvent {
  // A change's event is built once the change is made (tokens a Reactor stored included); a
  // create that only found existing tokens (deduplication) changed nothing.
  if (changed && fields.outcome === 'success' && isChangeAction(fields.action)) ctx.state.changed = true
  return Object.assign(requestAudit(ctx), fields)
}

const REVEALING: readonly Transform[] = ['redact', 'mask', 'reveal']

/** The most revealing transform among a page's tokens (none for an empty page). */
export function mostRevealing(views: readonly { transform: Transform }[]): Transform | undefined {
  let most: Transform | undefined
  for (const { transform } of views) if (most === undefined || REVEALING.indexOf(transform) > REVEALING.indexOf(most)) most = transform
  return most
}

/**
 * One successful token operation of this request, e.g. a read with its transform. Token events
 * that carry data are `record`ed before the answer is set: if the write fails, the caller gets
 * 503 and nothing of the tokens.
 */
export function tokenEvent(ctx: ParameterizedContext<AppState>, action: AuditAction, ids: readonly string[], status: number, views: readonly { transform: Transform }[] = [], changed = true): AuditEvent {
  const transform = mostRevealing(views)
  const event = auditEvent(ctx, { action, target: { type: 'token', ids }, outcome: 'success', status }, changed)
  if (transform) event.transform = transform
  return event
}

/**
 * A management change that succeeded (Application, session, Reactor, proxy, tenant), `record`ed
 * after the change and before the answer: if the write fails the change stands, the caller gets
 * 503, and a key the change made is never shown.
 */
export function changeEvent(ctx: ParameterizedContext<AppState>, action: AuditAction, type: TargetType, id: string, status: number): AuditEvent {
  return auditEvent(ctx, { action, target: { type, ids: [id] }, outcome: 'success', status })
}

/** `reactor.fetch` of Reactor or transform code (target: the Reactor or proxy; parent: the call's entry). */
export function fetchEvent(shared: RequestAudit, target: AuditEvent['target'], parentId: string, origin: string, method: string): AuditEvent {
  const event: AuditEvent = Object.assign({}, shared, { action: 'reactor.fetch' as const, parentId, outcome: 'success' as const, status: 200 })
  if (target) event.target = target
  // The bridge refuses a method outside the closed list (see reactors/bridges.ts); were one to come, the destination is left out.
  if (httpMethods.includes(method as HttpMethod)) event.destination = { origin, method: method as HttpMethod }
  return event
}
