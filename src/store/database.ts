import { chmodSync, mkdirSync } from 'node:fs'
import path from 'node:path'
import knexFactory, { type Knex } from 'knex'
import pg from 'pg'
import type { Logger } from 'pino'
import type { Config } from '../config/index.js'
import { BoundedPg, BoundedPgLite, type UnavailableCounts } from './bounded-client.js'
import { lockDataDir } from './data-dir-lock.js'
import { Listener, type ListenerState } from './listener.js'

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
  /** Sends one notification per payload, in one statement, to every process listening on `channel` (on Postgres, this one too). */
  notify(channel: string, payloads: readonly string[]): Promise<void>
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

export const pgliteDir = (config: Config) => path.resolve(config.dataDir, 'pglite')

/** The client gives up this long after the server's own statement_timeout should have fired. */
const CLIENT_MARGIN_MS = 1_000


export function openPostgres(config: Config, url: string, options: OpenDatabaseOptions): Database {
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
    async notify(channel, payloads) {
      // One statement and one connection for every key a change revokes (up to 100 sessions' keys).
      await knex.raw('select pg_notify(?, payload) from unnest(?::text[]) as payload', [channel, [...payloads]])
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

export async function openPglite(config: Config, options: OpenDatabaseOptions, create: boolean): Promise<Database> {
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

export function knexLog(logger: Logger | undefined): Knex.Config['log'] {
  const log = (msg: unknown) => logger?.debug({ knex: msg }, 'knex')
  return { warn: log, error: log, deprecate: log, debug: log }
}