import { Type } from '@sinclair/typebox'
import { AuditEventList, ExportLogsQuery, ListLogsQuery } from '../schemas/logs.js'
import { op } from './operation.js'

const tag = 'Audit log'

export const logsOperations = [
  op({ method: 'get', path: '/logs', tag, summary: 'List audit events', description: 'Newest first; filters ANDed; send `pagination.next_cursor` back as `cursor`. Management keys only.', permission: 'log:read', query: ListLogsQuery, responses: { 200: { description: 'A page of audit events.', schema: AuditEventList } } }),
  op({ method: 'get', path: '/logs/export', tag, summary: 'Export audit events as NDJSON', description: 'Oldest first over `from`..`to` (to: now), or in chain order after `after_seq` (how to resume without missing an entry); one JSON event per line, streamed. Management keys only.', permission: 'log:read', query: ExportLogsQuery, responses: { 200: { description: 'application/x-ndjson: one audit event per line.', schema: Type.String() } } }),
]
