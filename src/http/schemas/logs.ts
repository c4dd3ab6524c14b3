import { Type, type Static, type TSchema } from '@sinclair/typebox'
import { actorKinds, auditActions, httpMethods, outcomes, targetTypes, transforms } from '../../audit/events.js'
import { ValidationError } from '../../errors/index.js'
import type { AuditFilter, AuditPosition } from '../../store/index.js'
import { DateTime, StringEnum, Uuid } from './common.js'
import { isStorableInstant } from '../../shapes/date-time.js'
import { isUuid } from '../../shapes/ids.js'
import { validator } from './validate.js'

const filters = {
  from: Type.Optional(DateTime),
  to: Type.Optional(DateTime),
  action: Type.Array(StringEnum([...auditActions]), { default: [], maxItems: auditActions.length }),
  actor_id: Type.Optional(Uuid),
  actor_kind: Type.Optional(StringEnum([...actorKinds])),
  target_type: Type.Optional(StringEnum([...targetTypes])),
  /** Matches an event's target ids and the token ids it detokenized. */
  target_id: Type.Optional(Type.String({ minLength: 1, maxLength: 400 })),
  outcome: Type.Array(StringEnum([...outcomes]), { default: [], maxItems: outcomes.length }),
}

export const ListLogsQuery = Type.Object(
  { ...filters, cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })), size: Type.Integer({ minimum: 1, maximum: 100, default: 20 }) },
  { additionalProperties: false },
)
export const ExportLogsQuery = Type.Object({ ...filters, after_seq: Type.Optional(Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER })) }, { additionalProperties: false })

const Ids = Type.Array(Type.String())
export const AuditEventResponse = Type.Object({
  id: Uuid,
  seq: Type.Integer(),
  time: DateTime,
  tenant_id: Uuid,
  actor: Type.Object({ kind: StringEnum([...actorKinds]), id: Type.Optional(Uuid) }),
  action: StringEnum([...auditActions]),
  target: Type.Optional(Type.Object({ type: StringEnum([...targetTypes]), ids: Ids })),
  outcome: StringEnum([...outcomes]),
  status: Type.Integer(),
  transform: Type.Optional(StringEnum([...transforms])),
  permission: Type.Optional(Type.String()),
  trace_id: Type.Optional(Type.String()),
  client_ip: Type.Optional(Type.String()),
  request: Type.Optional(Type.Object({ method: StringEnum([...httpMethods]), route: Type.String() })),
  token_ids: Type.Optional(Ids),
  destination: Type.Optional(Type.Object({ origin: Type.String(), method: StringEnum([...httpMethods]), status: Type.Optional(Type.Integer()) })),
  duration_ms: Type.Optional(Type.Integer()),
  parent_id: Type.Optional(Uuid),
  /** The entry's link in its tenant's hash chain (keep it to check the log later). */
  hash: Type.String(),
})
export type AuditEventResponse = Static<typeof AuditEventResponse>

export const AuditEventList = Type.Object({
  pagination: Type.Object({ page_size: Type.Integer(), next_cursor: Type.Optional(Type.String()) }),
  data: Type.Array(AuditEventResponse),
})

export interface LogsQuery {
  filter: AuditFilter
  after: AuditPosition | undefined
  size: number
}

const parseList = queryValidator(ListLogsQuery)
const parseExport = queryValidator(ExportLogsQuery)

export function parseListLogsQuery(query: unknown): LogsQuery {
  const q = parseList(query)
  return { filter: toFilter(q), after: q.cursor === undefined ? undefined : parseLogCursor(q.cursor), size: q.size }
}

/**
 * By time (`from`, `to` defaulting to now, so an export always ends) or, to resume without
 * missing an entry, by `after_seq`: an entry's time is taken when it is queued, so one can
 * commit after an export by time has passed it; seqs become visible in order.
 */
export function parseExportLogsQuery(query: unknown, now: Date): AuditFilter {
  const q = parseExport(query)
  if (q.after_seq !== undefined) return { ...toFilter(q), afterSeq: q.after_seq }
  if (q.from === undefined) throw ValidationError.field('from', 'is required unless after_seq is given')
  return toFilter({ ...q, to: q.to ?? now.toISOString() })
}


type Filters = Omit<Static<typeof ListLogsQuery>, 'cursor' | 'size'>

function toFilter(q: Filters): AuditFilter {
  const from = q.from === undefined ? undefined : new Date(q.from)
  const to = q.to === undefined ? undefined : new Date(q.to)
  if (from && to && from >= to) throw ValidationError.field('to', 'must be after from')
  return { from, to, actions: q.action, outcomes: q.outcome, actorId: q.actor_id?.toLowerCase(), actorKind: q.actor_kind, targetType: q.target_type, targetIds: targetIds(q.target_id) }
}

/**
 * Ids of Applications, Reactors, proxies and the like are stored lower-case, token ids as they
 * are: a uuid given in upper case finds both spellings.
 */
function targetIds(id: string | undefined): string[] | undefined {
  if (id === undefined) return undefined
  return isUuid(id) && id !== id.toLowerCase() ? [id, id.toLowerCase()] : [id]
}

/** Opaque to clients: where the page ended, as (time in ms, seq). */
export function encodeLogCursor(position: AuditPosition): string {
  return Buffer.from(`${position.occurredAt.getTime()}_${position.seq}`).toString('base64url')
}

/**
 * The cursor after `position`, or none when no cursor names it: only a row of a table whose
 * owner dropped its time check (a year past 9999, BC) or forged a negative seq, which ends the
 * listing there. A cursor the API would then refuse as not its own is never handed out.
 */
export function logCursorAfter(position: AuditPosition): string | undefined {
  const { occurredAt, seq } = position
  return isStorableInstant(occurredAt.getTime()) && Number.isSafeInteger(seq) && seq >= 0 && seq < 1e15 ? encodeLogCursor(position) : undefined
}

// 15 digits of ms reach year 33658, which PGlite refuses (a 500): the instant is bounded as any time is.
// Negative before 1970: an entry's time is any the table allows, years 1 to 9999.
function parseLogCursor(cursor: string): AuditPosition {
  const match = /^(-?\d{1,15})_(\d{1,15})$/.exec(Buffer.from(cursor, 'base64url').toString('latin1'))
  const time = Number(match?.[1])
  const seq = Number(match?.[2])
  if (!match || !isStorableInstant(time) || !Number.isSafeInteger(seq) || encodeLogCursor({ occurredAt: new Date(time), seq }) !== cursor) {
    throw ValidationError.field('cursor', 'is not a cursor this API returned')
  }
  return { occurredAt: new Date(time), seq }
}

/** Query validation whose errors name the parameter (`action`, not `action[1]`). */
function queryValidator<S extends TSchema>(schema: S): (value: unknown) => Static<S> {
  const validate = validator(schema, { query: true })
  return (value) => {
    try {
      return validate(value)
    } catch (err) {
      if (!(err instanceof ValidationError) || !err.errors) throw err
      // A Map: a parameter named `constructor` or `__proto__` must not find Object.prototype's.
      const errors = new Map<string, string[]>()
      for (const [field, messages] of Object.entries(err.errors)) {
        const name = field.replace(/\[\d+\]$/, '')
        errors.set(name, [...(errors.get(name) ?? []), ...messages])
      }
      throw new ValidationError(Object.fromEntries(errors))
    }
  }
}
