import type { Knex } from 'knex'
import type { Database, OpenDatabaseOptions } from './database.js'
import { openDatabase } from './open-database.js'
export { openDatabase, runMigrations, migrationStatus, type MigrationStatus } from './open-database.js'
export { eachSavedCodePage } from './saved-code-as-is.js'
import { applicationsRepository, type ApplicationsRepository } from './repositories/applications.js'
import { applicationKeysRepository, type ApplicationKeysRepository } from './repositories/application-keys.js'
import { idempotencyRepository, type IdempotencyRepository } from './repositories/idempotency.js'
import { auditRepository, type AuditRepository } from './repositories/audit.js'
import { metaRepository, type MetaRepository } from './repositories/meta.js'
import { proxiesRepository, type ProxiesRepository } from './repositories/proxies.js'
import { reactorsRepository, type ReactorsRepository } from './repositories/reactors.js'
import { sessionsRepository, type SessionsRepository } from './repositories/sessions.js'
import { tokensRepository, type TokensRepository } from './repositories/tokens.js'
import { tenantsRepository, type TenantsRepository } from './repositories/tenants.js'
import type { Config } from '../config/index.js'
import { systemClock, type Clock } from '../clock.js'
import { confirmedWrite } from './unavailable.js'

export interface Store {
  db: Database
  tenants: TenantsRepository
  applications: ApplicationsRepository
  applicationKeys: ApplicationKeysRepository
  meta: MetaRepository
  tokens: TokensRepository
  sessions: SessionsRepository
  reactors: ReactorsRepository
  proxies: ProxiesRepository
  idempotency: IdempotencyRepository
  audit: AuditRepository
  /** Runs `fn` in one transaction; repositories accept the transaction as their last argument. */
  transaction<T>(fn: (trx: Knex.Transaction) => Promise<T>): Promise<T>
  /**
   * Runs a write whose answer may be lost (unavailable.ts, `confirmedWrite`): if it may have
   * committed, `landed` is asked (within the acquire bound) and a yes counts as success. Answers
   * the write's result, or undefined when only `landed` could tell it succeeded.
   */
  confirmed<T>(write: () => Promise<T>, landed: () => Promise<boolean>): Promise<T | undefined>
}

export interface OpenStoreOptions extends OpenDatabaseOptions {
  /** What time it is for the queries that leave expired rows out (tokens); the system clock by default. */
  clock?: Clock
}

export async function openStore(config: Config, options: OpenStoreOptions = {}): Promise<Store> {
  const { clock = systemClock, ...dbOptions } = options
  const db = await openDatabase(config, dbOptions)
  return {
    db,
    tenants: tenantsRepository(db.knex),
    applications: applicationsRepository(db.knex),
    applicationKeys: applicationKeysRepository(db.knex),
    meta: metaRepository(db.knex),
    tokens: tokensRepository(db.knex, clock),
    sessions: sessionsRepository(db.knex),
    reactors: reactorsRepository(db.knex),
    proxies: proxiesRepository(db.knex),
    idempotency: idempotencyRepository(db.knex, db.leases),
    audit: auditRepository(db.knex, db.kind),
    transaction: (fn) => db.knex.transaction(fn),
    confirmed(write, landed) {
      return confirmedWrite(write, landed, config.database.acquireTimeoutMs)
    },
  }
}

export type { Database } from './database.js'
/** What `Store.transaction` hands its function, for repository calls inside it. */
export type StoreTransaction = Knex.Transaction
export type { ApplicationRecord, ApplicationType, ApplicationFilter } from './repositories/applications.js'
export type { Page } from './repositories/page.js'
export { changeStamp, newRecordStamp, type Author, type RecordStamp } from './repositories/stamps.js'
export type { ApplicationKeyRecord } from './repositories/application-keys.js'
export type { Tenant, TenantSettings } from './repositories/tenants.js'
export { defaultTenantSettings } from './repositories/tenants.js'
export type { AccessRuleRecord } from './repositories/types.js'
export type { TokenRecord, TokenFilter, TokenPosition, AccessScope, ScopeMatch, TokenMark } from './repositories/tokens.js'
export type { SessionRecord } from './repositories/sessions.js'
export type { ReactorRecord } from './repositories/reactors.js'
export type { SavedCode } from './repositories/saved-code.js'
export type { ProxyRecord, ProxyPatch } from './repositories/proxies.js'
export type { IdempotencyRecord } from './repositories/idempotency.js'
export type { AuditRow, UnsealedAuditRow, ChainHead, CheckpointRow, ChainSealer, AuditFilter, AuditPosition, ChainReader, ChainEntry, AuditRepository } from './repositories/audit.js'

/** A foreign key that names a row deleted meanwhile (Postgres or PGlite). */
export function isForeignKeyViolation(err: unknown): boolean {
  return (err as { code?: unknown } | null)?.code === '23503'
}

/** A Postgres (or PGlite) unique-constraint violation, for translating into a 409. */
export function isUniqueViolation(err: unknown): boolean {
  return (err as { code?: unknown } | null)?.code === '23505'
}
