import { Readable } from 'node:stream'
import type { AuditLog } from '../../audit/audit-log.js'
import type { AuditRow } from '../../store/index.js'
import { auditEvent } from '../audit-context.js'
import type { AppContext, AppRouter } from '../context.js'
import { currentPrincipal, requirePermission } from '../middleware/authenticate.js'
import { presentAuditEvent, presentAuditPage } from '../presenters/logs.js'
import { parseExportLogsQuery, parseListLogsQuery } from '../schemas/logs.js'

/** The tenant's audit log (management keys with `log:read`); reading it is itself audited. */
export function logsRoutes(router: AppRouter, audit: AuditLog): void {
  router.get('/logs', requirePermission('log:read', ['management']), async (ctx) => {
    const q = parseListLogsQuery({ ...ctx.query })
    const rows = await audit.list(currentPrincipal(ctx.state).tenantId, q.filter, q.after, q.size + 1)
    ctx.body = presentAuditPage(rows, q.size)
    noteRead(ctx, audit, 'log.read')
  })

  // NDJSON, oldest first, read in chunks as the client takes it: memory stays bounded at any range.
  router.get('/logs/export', requirePermission('log:read', ['management']), async (ctx) => {
    const filter = parseExportLogsQuery({ ...ctx.query }, new Date())
    const rows = audit.export(currentPrincipal(ctx.state).tenantId, filter)
    // The first read happens before the answer starts, so a database failure is still a problem+json.
    const first = await rows.next()
    noteRead(ctx, audit, 'log.export')
    ctx.type = 'application/x-ndjson'
    ctx.body = Readable.from(ndjson(first, rows))
  })
}

function noteRead(ctx: AppContext, audit: AuditLog, action: 'log.read' | 'log.export'): void {
  audit.note([auditEvent(ctx, { action, target: { type: 'log', ids: [] }, outcome: 'success', status: 200 })])
}

async function* ndjson(first: IteratorResult<AuditRow>, rest: AsyncGenerator<AuditRow>): AsyncGenerator<string> {
  if (first.done) return
  yield `${JSON.stringify(presentAuditEvent(first.value))}\n`
  for await (const row of rest) yield `${JSON.stringify(presentAuditEvent(row))}\n`
}
