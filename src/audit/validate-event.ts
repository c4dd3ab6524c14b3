import { isIP } from 'node:net'
import { Type, type TSchema } from '@sinclair/typebox'
import { Ajv } from 'ajv'
import addFormats from 'ajv-formats'
import { isKnownPermission } from '../auth/permissions.js'
import { isValidTokenId } from '../expressions/token-id.js'
import { actorKinds, auditActions, httpMethods, outcomes, targetTypes, transforms, type AuditEvent } from './events.js'

/** Most ids one event carries (a proxy call's token budget is configurable up to 10,000). */
export const MAX_EVENT_IDS = 10_000

/** A route template such as `/tokens/:id`: the path a caller used could hold a token id or worse. */
export const ROUTE_TEMPLATE = /^\/[A-Za-z0-9/:_.-]{0,199}$/

const oneOf = (values: readonly string[]) => Type.Unsafe<string>({ type: 'string', enum: [...values] })
const Uuid = Type.String({ format: 'uuid' })
const Ids = Type.Array(Type.String({ minLength: 1, maxLength: 400 }), { maxItems: MAX_EVENT_IDS })
const Status = Type.Integer({ minimum: 100, maximum: 599 })

const eventSchema: TSchema = Type.Object(
  {
    id: Type.Optional(Uuid),
    tenantId: Uuid,
    actor: Type.Object({ kind: oneOf(actorKinds), id: Type.Union([Uuid, Type.Null()]) }, { additionalProperties: false }),
    action: oneOf(auditActions),
    target: Type.Optional(Type.Object({ type: oneOf(targetTypes), ids: Ids }, { additionalProperties: false })),
    outcome: oneOf(outcomes),
    status: Status,
    traceId: Type.Union([Type.String({ pattern: '^[A-Za-z0-9._:-]{1,128}$' }), Type.Null()]),
    clientIp: Type.Union([Type.String({ maxLength: 45 }), Type.Null()]),
    request: Type.Optional(Type.Object({ method: oneOf(httpMethods), route: Type.String({ pattern: ROUTE_TEMPLATE.source }) }, { additionalProperties: false })),
    transform: Type.Optional(oneOf(transforms)),
    permission: Type.Optional(Type.String({ maxLength: 100 })),
    tokenIds: Type.Optional(Ids),
    destination: Type.Optional(
      Type.Object({ origin: Type.String({ maxLength: 2048 }), method: oneOf(httpMethods), status: Type.Optional(Status) }, { additionalProperties: false }),
    ),
    durationMs: Type.Optional(Type.Integer({ minimum: 0, maximum: 2_147_483_647 })),
    parentId: Type.Optional(Uuid),
  },
  { additionalProperties: false },
)

const ajv = new Ajv({ allErrors: false, strict: false })
addFormats.default(ajv, ['uuid'])
const validateShape = ajv.compile(eventSchema)

/** An event a request path built wrongly: a programming error, never the caller's fault. */
export class AuditEventError extends Error {
  constructor(message: string) {
    super(`invalid audit event: ${message}`)
    this.name = 'AuditEventError'
  }
}

/**
 * Throws AuditEventError unless `event` is well formed: the shape above, plus the checks a
 * schema cannot say. Messages name the field, never its value (it might be what must not leak).
 */
export function validateAuditEvent(event: AuditEvent): void {
  if (!validateShape(event)) {
    const e = validateShape.errors?.[0]
    throw new AuditEventError(`${e?.instancePath || '/'} ${e?.message ?? 'is invalid'}`)
  }
  if (event.target) checkIds('target.ids', event.target.ids, event.target.type === 'token')
  if (event.tokenIds) checkIds('tokenIds', event.tokenIds, true)
  if (event.clientIp !== null && isIP(event.clientIp) === 0) throw new AuditEventError('clientIp is not an IP address')
  if (event.permission !== undefined && !isKnownPermission(event.permission)) throw new AuditEventError('permission is not a known permission')
  if (event.destination && !isBareOrigin(event.destination.origin)) throw new AuditEventError('destination.origin must be scheme://host[:port] only')
}

function checkIds(field: string, ids: readonly string[], tokenIds: boolean): void {
  const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i
  for (const id of ids) {
    if (tokenIds ? !isValidTokenId(id) : !uuid.test(id)) throw new AuditEventError(`${field} holds a value that is not ${tokenIds ? 'a token id' : 'a uuid'}`)
  }
}

/** Origins already found bare: a proxy calls few, and parsing one cost about 3 µs per event. */
const bareOrigins = new Set<string>()
const BARE_ORIGINS_MAX = 1000

/** A path, query or credentials could carry data; an origin cannot. */
function isBareOrigin(origin: string): boolean {
  if (bareOrigins.has(origin)) return true
  let url: URL
  try {
    url = new URL(origin)
  } catch {
    return false
  }
  if ((url.protocol !== 'https:' && url.protocol !== 'http:') || url.origin !== origin) return false
  if (bareOrigins.size >= BARE_ORIGINS_MAX) bareOrigins.clear()
  bareOrigins.add(origin)
  return true
}
