import { randomUUID } from 'node:crypto'
import { auditKeyring } from '../../src/audit/audit-keys.js'
import { createAuditLog, type AuditLog } from '../../src/audit/audit-log.js'
import type { AuditEvent } from '../../src/audit/events.js'
import type { Config } from '../../src/config/index.js'
import type { AuditRow } from '../../src/store/index.js'
import type { TestApp } from './app.js'

/** The tenant of the app's bootstrap management key. */
export async function defaultTenant(app: TestApp): Promise<string> {
  return (await app.services.authenticator.authenticate(app.adminKey)).tenantId
}

/** A well-formed event; `overrides` replace fields. */
export function auditEvent(tenantId: string, overrides: Partial<AuditEvent> = {}): AuditEvent {
  return {
    tenantId,
    actor: { kind: 'application', id: randomUUID() },
    action: 'token.read',
    target: { type: 'token', ids: [randomUUID()] },
    outcome: 'success',
    status: 200,
    traceId: randomUUID(),
    clientIp: '127.0.0.1',
    transform: 'reveal',
    ...overrides,
  }
}

/** A second audit log on the app's store, with its own clock (for retention) and settings. */
export function auditLogWithClock(app: TestApp, now: () => Date, settings: Partial<Config['audit']> = {}): AuditLog {
  const config = { ...app.config.audit, ...settings }
  const audit = createAuditLog({ store: app.services.store, keyring: auditKeyring(config.secret, app.config.keyHashSecret!), config, logger: app.services.logger, now })
  return audit
}

/** Every entry (of one tenant) in chain order, on a test app or on services a test opened itself. */
export async function auditRows(app: { services: Pick<TestApp['services'], 'store'> }, tenantId?: string): Promise<AuditRow[]> {
  const q = app.services.store.db.knex<AuditRow>('audit_events').orderBy([{ column: 'tenant_id' }, { column: 'seq' }])
  if (tenantId) void q.where({ tenant_id: tenantId })
  return q
}

/** Runs `fn` with the append-only triggers off, as an attacker owning the tables could. */
export async function tamper(app: TestApp, fn: (knex: TestApp['services']['store']['db']['knex']) => Promise<unknown>): Promise<void> {
  const knex = app.services.store.db.knex
  await knex.raw('alter table audit_events disable trigger audit_events_no_update')
  await knex.raw('alter table audit_checkpoints disable trigger audit_checkpoints_no_update')
  try {
    await fn(knex)
  } finally {
    await knex.raw('alter table audit_events enable trigger audit_events_no_update')
    await knex.raw('alter table audit_checkpoints enable trigger audit_checkpoints_no_update')
  }
}

/** DATABASE_URL pointing at the app's own schema (for tools that open their own connection). */
export function schemaUrl(app: TestApp, user?: string): string {
  const url = new URL(app.config.databaseUrl!)
  if (user) url.username = user
  if (app.schema) url.searchParams.set('options', `-c search_path=${app.schema}`)
  return url.toString()
}

/** The audit log's own statements: its batch transaction and what runs in it. */
const AUDIT_STATEMENT = /audit_|^(begin|commit|rollback)\b|set_config\('statement_timeout'/i

/**
 * Counts the app's database queries other than the audit log's writes, from now until the test
 * ends: `queries()` is the count so far. `ignore` leaves out more statements (see its callers).
 */
export function countQueries(t: { teardown(fn: () => unknown): void }, app: TestApp, ignore?: RegExp): () => number {
  let queries = 0
  const count = (q: { sql: string }) => void (AUDIT_STATEMENT.test(q.sql) || ignore?.test(q.sql) || queries++)
  app.services.store.db.knex.on('query', count)
  t.teardown(() => void app.services.store.db.knex.off('query', count))
  return () => queries
}
