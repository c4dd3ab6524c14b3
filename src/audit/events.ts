/**
 * The audit event model. Every field is an identifier, a code from a closed list, a number or
 * a time: there is deliberately no free-form field (no message, no detail, no metadata), so an
 * event has nowhere to hold plaintext, a key, a token's data or mask output. `validateAuditEvent`
 * enforces the same at run time (ids must look like ids, the origin must be a bare origin).
 */

/** What happened. Adding one is a code change (and a README row), never a caller's string. */
export const auditActions = [
  'token.create',
  'token.read',
  'token.list',
  'token.update',
  'token.delete',
  'token.search',
  'token.detokenize',
  /** Fail-closed, before forwarding: the token ids detokenized into the request, origin, method. */
  'proxy.request',
  /** After the destination answered (or failed): destination status and duration. */
  'proxy.response',
  /** A proxied call that detokenized nothing (it revealed no data): one entry when it ends, with what proxy.request and proxy.response carry. */
  'proxy.call',
  /** Fail-closed, before the runtime gets the detokenized args. */
  'reactor.invoke',
  /** Fail-closed, before a bridge hands a running Reactor plaintext. */
  'reactor.token_read',
  /** Fail-closed, before Reactor or transform code's `fetch` sends anything: destination origin and method. */
  'reactor.fetch',
  /** When an invocation ends (answered or failed): the caller's status and the duration; parent: its `reactor.invoke`. */
  'reactor.result',
  'application.create',
  'application.update',
  'application.delete',
  'application.regenerate_key',
  /** An extra key of an Application (`POST /applications/{id}/keys`); the target is the Application. */
  'application.key_create',
  'application.key_delete',
  'session.create',
  'session.authorize',
  'reactor.create',
  'reactor.update',
  'reactor.delete',
  'proxy.create',
  'proxy.update',
  'proxy.delete',
  'proxy.regenerate_key',
  'tenant.create',
  'tenant.update',
  'tenant.delete',
  'auth.failed',
  'auth.denied',
  'log.read',
  'log.export',
] as const
export type AuditAction = (typeof auditActions)[number]

/**
 * Actions whose event is built once the change is made (the event names what was made): when
 * the request fails after that, 503 for the entry or anything else, the change stands.
 */
const CHANGES = /\.(create|update|delete|regenerate_key|key_create|key_delete|authorize)$/

export function isChangeAction(action: AuditAction): boolean {
  return CHANGES.test(action)
}

export const actorKinds = ['application', 'session', 'proxy', 'reactor', 'operator', 'anonymous'] as const
export type ActorKind = (typeof actorKinds)[number]

export const targetTypes = ['token', 'application', 'session', 'reactor', 'proxy', 'tenant', 'log'] as const
export type TargetType = (typeof targetTypes)[number]

/** success: done; denied: refused (401/403); failure: attempted and failed (4xx/5xx, destination error). */
export const outcomes = ['success', 'denied', 'failure'] as const
export type Outcome = (typeof outcomes)[number]

export const transforms = ['redact', 'mask', 'reveal'] as const
export type Transform = (typeof transforms)[number]

export const httpMethods = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const
export type HttpMethod = (typeof httpMethods)[number]

/** Who acted. `id` is the Application, session, proxy or Reactor id; never a key or key hash. */
export interface AuditActor {
  kind: ActorKind
  id: string | null
}

/** One audit event as request paths hand it to `AuditRecorder`. */
export interface AuditEvent {
  /** Set by the caller only when a later event must name this one as `parentId`; generated otherwise. */
  id?: string
  /** The tenant whose chain holds the event; `UNATTRIBUTED_TENANT` when none is known (bad key). */
  tenantId: string
  actor: AuditActor
  action: AuditAction
  /** What was acted on: token ids for `token`, uuids otherwise. */
  target?: { type: TargetType; ids: readonly string[] }
  outcome: Outcome
  /** The HTTP status the caller got (or will get). */
  status: number
  traceId: string | null
  clientIp: string | null
  /** The route template and method the caller used, e.g. `GET /tokens/:id`; never the path itself. */
  request?: { method: HttpMethod; route: string }
  /** The access-rule transform applied to the targets (token reads). */
  transform?: Transform
  /** The permission that was checked (refusals) or used. */
  permission?: string
  /** Tokens whose plaintext was detokenized (proxy, Reactor, detokenize). */
  tokenIds?: readonly string[]
  /** Proxy calls: scheme, host and port only; method; status once the destination answered. */
  destination?: { origin: string; method: HttpMethod; status?: number }
  durationMs?: number
  /** The event this one completes (e.g. `proxy.response` -> its `proxy.request`). */
  parentId?: string
}

/** Chain of events no tenant could be named for (failed authentication with an unknown key). */
export const UNATTRIBUTED_TENANT = '00000000-0000-0000-0000-000000000000'

/** `401`/`403` are denials; other errors failures. */
export function outcomeOf(status: number): Outcome {
  if (status === 401 || status === 403) return 'denied'
  return status >= 400 ? 'failure' : 'success'
}
