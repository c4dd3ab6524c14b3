import type { AuditRow } from '../../store/index.js'
import { logCursorAfter, type AuditEventResponse } from '../schemas/logs.js'
import { compact } from './common.js'
import { isInstant } from '../../shapes/date-time.js'

/** An audit entry as the API shows it. Every field is an id, a code, a number or a time. */
export function presentAuditEvent(row: AuditRow): AuditEventResponse {
  return compact({
    id: row.id,
    seq: row.seq,
    time: entryTime(row.occurred_at),
    tenant_id: row.tenant_id,
    actor: compact({ kind: row.actor_kind, id: row.actor_id ?? undefined }),
    action: row.action,
    target: row.target_type ? { type: row.target_type, ids: row.target_ids } : undefined,
    outcome: row.outcome,
    status: row.status,
    transform: row.transform ?? undefined,
    permission: row.permission ?? undefined,
    trace_id: row.trace_id ?? undefined,
    client_ip: row.client_ip ?? undefined,
    request: row.request_method && row.request_route ? { method: row.request_method, route: row.request_route } : undefined,
    token_ids: row.token_ids.length ? row.token_ids : undefined,
    destination: row.destination_origin && row.destination_method
      ? compact({ origin: row.destination_origin, method: row.destination_method, status: row.destination_status ?? undefined })
      : undefined,
    duration_ms: row.duration_ms ?? undefined,
    parent_id: row.parent_id ?? undefined,
    hash: row.hash,
  }) as AuditEventResponse
}

/**
 * An entry's time. A row altered to hold a time no Date can (`infinity`, a year past 275760:
 * the table refuses both since the audit_times migration, unless its owner drops the check) is
 * still shown, as `infinity`, `-infinity` or `invalid`, not a 500; `audit verify` reports it.
 */
function entryTime(at: unknown): string {
  if (isInstant(at)) return at.toISOString()
  return at === Infinity ? 'infinity' : at === -Infinity ? '-infinity' : 'invalid'
}

/** A page of entries (fetched one beyond `size`, so the presence of a next page is known). */
export function presentAuditPage(rows: AuditRow[], size: number) {
  const data = rows.slice(0, size)
  const last = data.at(-1)
  // No position to resume from after an entry with no instant (see entryTime), or one no cursor names: the listing ends there.
  const next_cursor = rows.length > size && last && isInstant(last.occurred_at) ? logCursorAfter({ occurredAt: last.occurred_at, seq: last.seq }) : undefined
  return { pagination: compact({ page_size: size, next_cursor }), data: data.map(presentAuditEvent) }
}
