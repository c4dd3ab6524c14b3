import { chmodSync, existsSync, mkdirSync } from 'node:fs'
import path from 'node:path'
import knexFactory, { type Knex } from 'knex'
import pg from 'pg'
import type { Logger } from 'pino'
import type { Config } from '../config/index.js'
import { migrationSource } from '../../migrations/index.js'
import { BoundedPg, BoundedPgLite, refusedConnection, sqlState, type UnavailableCounts } from './bounded-client.js'
import { lockDataDir } from './data-dir-lock.js'
import { Listener, type ListenerState } from './listener.js'
import { unavailableError } from './unavailable.js'

export type DatabaseKind = 'postgres' | 'pglite'
export type { ListenerState } from './listener.js'

export interface Database {
  readonly knex: Knex
  /**
   * A connection of its own for renewing idempotency claims: a renewal must run while the
   * requests it covers fill the pool (waiting on a locked table, say), or their claims lapse and
   * a retry runs them again. PGlite's one connection is `knex` itself.
   */
  readonly leases: Knex
  readonly kind: DatabaseKind
  /**
   * Subscribes to notifications from other processes (Postgres LISTEN); a no-op on PGlite,
   * which is one process. Several handlers may share a channel.
   */
  listen(channel: string, onMessage: (payload: string) => void): Promise<void>
  /** Sends a notification to every process listening on `channel` (on Postgres, this one too). */
  notify(channel: string, payload: string): Promise<void>
  /** `lost`: notifications may be missed from now on; `restored`: listening again after a loss. */
  onListenerState(handler: (state: ListenerState) => void): void
  /** Rejects when the database does not answer within the statement bound. */
  ping(): Promise<void>
  /** Pool use now, and availability failures so far (for metrics). */
  stats(): DatabaseStats
  close(): Promise<void>
}

export interface DatabaseStats {
  used: number
  free: number
  /** Callers waiting for a connection. */
  pending: number
  unavailable: Readonly<UnavailableCounts>
}

interface TarnPool {
  numUsed(): number
  numFree(): number
  numPendingAcquires(): number
}

/** Where the bounded client finds the counts (knex keeps its config, and transactions share it). */
const countsIn = (unavailable: UnavailableCounts) => ({ unavailable }) as Partial<Knex.Config>

function poolStats(knex: Knex, unavailable: UnavailableCounts): DatabaseStats {
  const pool = (knex.client as { pool?: TarnPool }).pool
  return { used: pool?.numUsed() ?? 0, free: pool?.numFree() ?? 0, pending: pool?.numPendingAcquires() ?? 0, unavailable: { ...unavailable } }
}

export interface OpenDatabaseOptions {
  /** Postgres schema to use (created if missing); tests use one schema each. */
  schema?: string
  /** PGlite only: keep the database in memory instead of under `dataDir`. */
  inMemory?: boolean
  /**
   * Default true: bring the schema up to date on open. false (the operator commands): create
   * nothing (no data dir, no table) and refuse a place with no Tessera database, or one not up to date.
   */
  migrate?: boolean
  /** Receives knex's and the listener's warnings. */
  logger?: Logger
}

// Postgres returns int8 (count(*)) as a string; our counts fit in a JS number.
pg.types.setTypeParser(pg.types.builtins.INT8, (v) => Number.parseInt(v, 10))
// Dates go out as UTC. In the process's own zone (TZ), pg writes a historical offset that has
// seconds (local mean time: +05:53:28 in Asia/Kolkata before 1900) rounded to the minute, so
// a time read back and sent again moved: a log cursor before 1900 named its own entry again
// and paging repeated it forever.
pg.defaults.parseInputDatesAsUTC = true

/** The client gives up this long after the server's own statement_timeout should have fired. */
const CLIENT_MARGIN_MS = 1_000

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
  if (!config.databaseUrl && noPglite(config, options)) return { completed: [], pending: known }
  const db = config.databaseUrl ? openPostgres(config, config.databaseUrl, options) : await openPglite(config, options, false)
  try {
    const completed = (await appliedMigrations(db.knex)) ?? []
    return { completed, pending: known.filter((name) => !completed.includes(name)) }
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

const pgliteDir = (config: Config) => path.resolve(config.dataDir, 'pglite')

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

function openPostgres(config: Config, url: string, options: OpenDatabaseOptions): Database {
  const { statementTimeoutMs, acquireTimeoutMs, poolMax, listenerBackoffMaxMs } = config.database
  const unavailable: UnavailableCounts = { acquire: 0, query: 0 }
  const pooled = (max: number) => knexFactory({
    ...countsIn(unavailable),
    client: BoundedPg,
    connection: {
      connectionString: url,
      statement_timeout: statementTimeoutMs,
      // A transaction whose client vanished without the server hearing (a partition, a lost
      // FIN) would keep its row locks until TCP keep-alive notices, two hours by default: an
      // audit chain's head or a token locked, every request needing it a 503 meanwhile. No
      // transaction of ours idles between statements for longer than this bound.
      idle_in_transaction_session_timeout: statementTimeoutMs + CLIENT_MARGIN_MS,
      query_timeout: statementTimeoutMs + CLIENT_MARGIN_MS,
      connectionTimeoutMillis: acquireTimeoutMs,
      keepAlive: true,
    } as Knex.PgConnectionConfig,
    searchPath: options.schema ? [options.schema] : undefined,
    acquireConnectionTimeout: acquireTimeoutMs,
    pool: { min: 0, max },
    log: knexLog(options.logger),
  })
  const knex = pooled(poolMax)
  const leases = pooled(1)
  const listener = new Listener({ url, logger: options.logger, timeoutMs: acquireTimeoutMs, backoffMaxMs: listenerBackoffMaxMs })
  return {
    knex,
    leases,
    kind: 'postgres',
    listen: (channel, onMessage) => listener.listen(channel, onMessage),
    async notify(channel, payload) {
      await knex.raw('select pg_notify(?, ?)', [channel, payload])
    },
    onListenerState: (handler) => listener.onState(handler),
    async ping() {
      await knex.raw('select 1')
    },
    stats: () => poolStats(knex, unavailable),
    async close() {
      await listener.close()
      await Promise.all([knex.destroy(), leases.destroy()])
    },
  }
}

async function openPglite(config: Config, options: OpenDatabaseOptions, create: boolean): Promise<Database> {
  let connection = {} as Knex.StaticConnectionConfig
  let unlock = async () => {}
  if (!options.inMemory) {
    const filename = pgliteDir(config)
    // PGlite makes its files (the WAL too) readable and writable by all under the usual umask:
    // like Postgres's own data directory, the one holding them is the server user's alone.
    if (create) mkdirSync(filename, { recursive: true, mode: 0o700 })
    try {
      chmodSync(filename, 0o700)
    } catch (err) {
      options.logger?.warn({ code: (err as NodeJS.ErrnoException).code, dir: filename }, 'the embedded database directory could not be made private (mode 0700); other users may read it')
    }
    // Before PGlite touches the files (knex starts it at once): one process owns them.
    unlock = await lockDataDir(filename, options.logger)
    connection = { filename }
  }
  // One connection (PGlite is single-user): the acquire bound is what keeps a queue of requests bounded.
  const unavailable: UnavailableCounts = { acquire: 0, query: 0 }
  const knex = knexFactory({ ...countsIn(unavailable), client: BoundedPgLite, dialect: 'postgres', connection, acquireConnectionTimeout: config.database.acquireTimeoutMs, log: knexLog(options.logger) })
  return {
    knex,
    leases: knex,
    kind: 'pglite',
    async listen() {},
    async notify() {},
    onListenerState() {},
    async ping() {
      await knex.raw('select 1')
    },
    stats: () => poolStats(knex, unavailable),
    async close() {
      await knex.destroy()
      // knex closes PGlite only if it ever handed out the connection; the next owner must find it closed.
      const pglite = (knex.client as { pglite?: { closed: boolean; close(): Promise<void> } }).pglite
      if (pglite && !pglite.closed) await pglite.close()
      await unlock()
    },
  }
}

function knexLog(logger: Logger | undefined): Knex.Config['log'] {
  const log = (msg: unknown) => logger?.debug({ knex: msg }, 'knex')
  return { warn: log, error: log, deprecate: log, debug: log }
}
