import { existsSync } from 'node:fs'
import path from 'node:path'
import knexFactory, { type Knex } from 'knex'
import type pg from 'pg'
import type { Logger } from 'pino'
import type { Config } from '../config/index.js'
import { migrationSource } from '../../migrations/index.js'
import { refusedConnection, sqlState } from './bounded-client.js'
import { knexLog, openPglite, openPostgres, pgliteDir, type Database, type OpenDatabaseOptions } from './database.js'
import { unavailableError } from './unavailable.js'

/** Opens Postgres when DATABASE_URL is set, otherwise embedded PGlite, and runs the migrations. */
export async function openDatabase(config: Config, options: OpenDatabaseOptions = {}): Promise<Database> {
  const migrate = options.migrate !== false
  if (config.databaseUrl) {
    if (migrate) await runMigrations(config, options)
    const db = openPostgres(config, config.databaseUrl, options)
    if (!migrate) await requireCurrent(db.knex, describeDatabase(config)).catch(closing(db))
    return db
  }
  // Not even a data dir for a mistyped SVC_DATA_DIR: the command would report success on a new, empty database.
  if (!migrate && noPglite(config, options)) throw noDatabase(describeDatabase(config))
  const db = await openPglite(config, options, migrate)
  // On failure, close: or the data directory stays locked for the rest of this process.
  await (migrate ? migrateLatest(db.knex) : requireCurrent(db.knex, describeDatabase(config))).catch(closing(db))
  return db
}

const closing = (db: Database) => async (err: unknown) => {
  await db.close()
  throw err
}

export interface MigrationStatus {
  completed: string[]
  /** Applied, but not migrations of this version: a newer Tessera migrated the database. */
  unknown: string[]
  pending: string[]
}

/** `tessera migrate`: brings the schema up to date (creating the database) and returns the migrations run. */
export async function runMigrations(config: Config, options: OpenDatabaseOptions = {}): Promise<string[]> {
  if (config.databaseUrl) {
    const admin = { url: config.databaseUrl, acquireTimeoutMs: config.database.acquireTimeoutMs, logger: options.logger }
    return migratePostgres(admin, options.schema).catch((err: unknown) => {
      throw notConnected(err) ?? err
    })
  }
  const db = await openPglite(config, options, true)
  return migrateLatest(db.knex).finally(() => db.close())
}

/** `tessera migrate --list`: reads only, and creates nothing where there is no database yet. */
export async function migrationStatus(config: Config, options: OpenDatabaseOptions = {}): Promise<MigrationStatus> {
  const known = await knownMigrations()
  if (!config.databaseUrl && noPglite(config, options)) return { completed: [], unknown: [], pending: known }
  const db = config.databaseUrl ? openPostgres(config, config.databaseUrl, options) : await openPglite(config, options, false)
  try {
    const completed = (await appliedMigrations(db.knex)) ?? []
    return { completed, unknown: completed.filter((name) => !known.includes(name)), pending: known.filter((name) => !completed.includes(name)) }
  } finally {
    await db.close()
  }
}

async function knownMigrations(): Promise<string[]> {
  return migrationSource.getMigrations([])
}

/** The migrations applied, in order; undefined where there is no migration table (no Tessera database). */
async function appliedMigrations(knex: Knex): Promise<string[] | undefined> {
  const found = (await knex.raw("select to_regclass('knex_migrations') is not null as found")) as { rows: { found: boolean }[] }
  if (!found.rows[0]?.found) return undefined
  return (await knex('knex_migrations').orderBy('id').pluck('name')) as string[]
}

/** Refuses a database a newer Tessera migrated, which knex would call "corrupt". */
function refuseNewer(applied: string[], known: string[]): void {
  const unknown = applied.filter((name) => !known.includes(name))
  if (unknown.length) throw new Error(`the database was migrated by a newer Tessera (${unknown.join(', ')}); run that version or restore a backup`)
}

/** Brings the schema up to date and returns the migrations run. */
async function migrateLatest(knex: Knex): Promise<string[]> {
  refuseNewer((await appliedMigrations(knex)) ?? [], await knownMigrations())
  // Where a migration runs outside a transaction (20261129000100), knex sets its own lock row in
  // a transaction of its own, and a process killed meanwhile leaves it set: every later start
  // would fail "Migration table is already locked". Freeing it is safe: every caller holds
  // Tessera's exclusive migration lock here (migratePostgres's advisory lock, PGlite's data-dir
  // lock, or an in-memory database of this process alone), so no one else is migrating. An
  // update of the row, not knex's forceFreeMigrationsLock (delete and insert): the service role
  // of docs/audit-grants.sql may only select and update it.
  const lockTable = (await knex.raw("select to_regclass('knex_migrations_lock') is not null as found")) as { rows: { found: boolean }[] }
  if (lockTable.rows[0]?.found) await knex('knex_migrations_lock').where('is_locked', 1).update({ is_locked: 0 })
  const [, names] = (await knex.migrate.latest({ migrationSource })) as [number, string[]]
  return names
}

/**
 * For the commands that must not migrate. A place with no Tessera database (a mistyped
 * SVC_DATA_DIR or DATABASE_URL) would otherwise get a new, empty one, and the command report
 * success on it; one not up to date would meet a schema its queries do not expect.
 */
async function requireCurrent(knex: Knex, where: string): Promise<void> {
  let applied: string[] | undefined
  try {
    applied = await appliedMigrations(knex)
  } catch (err) {
    // A role that may not read the migration list (the audit pruner of docs/audit-grants.sql): its own statements tell.
    if (sqlState(err) === '42501') return
    throw err
  }
  if (!applied?.length) throw noDatabase(where)
  const known = await knownMigrations()
  refuseNewer(applied, known)
  const pending = known.filter((name) => !applied.includes(name))
  if (pending.length) throw new Error(`the database at ${where} is not up to date (pending migrations: ${pending.join(', ')}); run \`tessera migrate\` first`)
}

function noDatabase(where: string): Error {
  return new Error(`no Tessera database at ${where}; start a server or run \`tessera migrate\` first`)
}

/** The data dir, or the database named in DATABASE_URL without user or password. */
function describeDatabase(config: Config): string {
  if (!config.databaseUrl) return path.resolve(config.dataDir)
  const url = new URL(config.databaseUrl)
  return `${url.protocol}//${url.host}${url.pathname}`
}


/** No PGlite database files under the data dir: opening it would make a new database. */
const noPglite = (config: Config, options: OpenDatabaseOptions) => !options.inMemory && !existsSync(path.join(pgliteDir(config), 'PG_VERSION'))

interface AdminConnection {
  url: string
  acquireTimeoutMs: number
  logger: Logger | undefined
}

/**
 * One connection for schema work, outside the pool. Connecting is bounded like the pool's
 * (knex would wait 60 s), and knex's warnings go to the logger: by default it prints a stack
 * trace to the console for every failed attempt, which the CLI would show the operator.
 */
function adminKnex(admin: AdminConnection, schema?: string): Knex {
  // connectionTimeoutMillis ends the attempt itself too: a server that takes the connection and
  // never answers (frozen, partitioned) otherwise kept its socket, and a CLI command, open forever.
  const connection = { connectionString: admin.url, connectionTimeoutMillis: admin.acquireTimeoutMs }
  // Two connections: the migration's, and the one holding the migration lock (migratePostgres).
  return knexFactory({ client: 'pg', connection, searchPath: schema ? [schema] : undefined, pool: { min: 0, max: 2 }, acquireConnectionTimeout: admin.acquireTimeoutMs, log: knexLog(admin.logger) })
}

/**
 * The schema connection never opened (refused, or no answer within the bound): nothing was
 * sent, so it is the usual "did not answer in time; nothing was changed", not knex's "pool is
 * probably full" or a bare ECONNREFUSED. Failures after it opened are left as they are.
 */
function notConnected(err: unknown): Error | undefined {
  const { name, code } = (err ?? {}) as { name?: unknown; code?: unknown }
  return name === 'KnexTimeoutError' || code === 'ECONNREFUSED' ? unavailableError(err, false) : undefined
}

/** Any number, the same in every Tessera version: migrations of one database run one at a time. */
const MIGRATION_LOCK = '7301296354041735168'
const MIGRATION_LOCK_WAIT_SECONDS = 600

/**
 * On a connection of its own, without the statement bound: a migration may rightly take long.
 * Replicas starting together take turns under a session advisory lock, held on a connection
 * other than the migration's: knex creates its tables before it takes its own lock, so two of
 * them could both `create table knex_migrations`. The lock goes with the session, which
 * `destroy` ends (and a dying process too), whether the migration passed or failed.
 */
async function migratePostgres(connection: AdminConnection, schema: string | undefined): Promise<string[]> {
  const admin = adminKnex(connection, schema)
  try {
    const locked = (await admin.client.acquireConnection().catch((err: unknown) => {
      throw refusedConnection(err) ?? err
    })) as pg.Client
    try {
      // Bounded: a process that froze while migrating must not stall every later start for good.
      await locked.query(`set lock_timeout = '${MIGRATION_LOCK_WAIT_SECONDS}s'`)
      await locked.query('select pg_advisory_lock($1)', [MIGRATION_LOCK]).catch((err: unknown) => {
        if (sqlState(err) !== '55P03') throw err
        throw new Error(`another Tessera process has held the migration lock of this database for ${MIGRATION_LOCK_WAIT_SECONDS} s; if none is migrating, end the session holding it (pg_locks, advisory lock ${MIGRATION_LOCK})`, { cause: err })
      })
      if (schema) await admin.raw('create schema if not exists ??', [schema])
      return await migrateLatest(admin)
    } finally {
      await admin.client.releaseConnection(locked)
    }
  } finally {
    await admin.destroy()
  }
}
