import { mkdirSync } from 'node:fs'
import path from 'node:path'
import knexFactory, { type Knex } from 'knex'
import ClientPgLite from 'knex-pglite'
import pg from 'pg'
import type { Config } from '../config/index.js'
import { migrationSource } from '../../migrations/index.js'

export type DatabaseKind = 'postgres' | 'pglite'

export interface Database {
  readonly knex: Knex
  readonly kind: DatabaseKind
  /** Subscribes to cross-process notifications (Postgres LISTEN); a no-op on PGlite, which is one process. */
  listen(channel: string, onMessage: (payload: string) => void): Promise<void>
  /** Sends a notification to every process listening on `channel`, including this one. */
  notify(channel: string, payload: string): Promise<void>
  /** Called once if the listening connection is lost (notifications may have been missed). */
  onListenerLost(handler: () => void): void
  ping(): Promise<void>
  close(): Promise<void>
}

export interface OpenDatabaseOptions {
  /** Postgres schema to use (created if missing); tests use one schema each. */
  schema?: string
  /** PGlite only: keep the database in memory instead of under `dataDir`. */
  inMemory?: boolean
}

// Postgres returns int8 (count(*)) as a string; our counts fit in a JS number.
pg.types.setTypeParser(pg.types.builtins.INT8, (v) => Number.parseInt(v, 10))

/** Opens Postgres when DATABASE_URL is set, otherwise embedded PGlite, and runs the migrations. */
export async function openDatabase(config: Config, options: OpenDatabaseOptions = {}): Promise<Database> {
  const db = config.databaseUrl ? await openPostgres(config.databaseUrl, options.schema) : openPglite(config, options)
  await db.knex.migrate.latest({ migrationSource })
  return db
}

async function openPostgres(url: string, schema: string | undefined): Promise<Database> {
  if (schema) {
    const admin = knexFactory({ client: 'pg', connection: url, pool: { min: 0, max: 1 } })
    await admin.raw('create schema if not exists ??', [schema]).finally(() => admin.destroy())
  }
  const knex = knexFactory({
    client: 'pg',
    connection: url,
    searchPath: schema ? [schema] : undefined,
    pool: { min: 1, max: 10 },
  })
  let listener: pg.Client | undefined
  const lost: (() => void)[] = []
  const handlers = new Map<string, (payload: string) => void>()
  return {
    knex,
    kind: 'postgres',
    async listen(channel, onMessage) {
      if (!listener) {
        listener = new pg.Client({ connectionString: url })
        listener.on('notification', (msg) => handlers.get(msg.channel)?.(msg.payload ?? ''))
        const onLost = () => lost.splice(0).forEach((fn) => fn())
        listener.on('error', onLost)
        listener.on('end', onLost)
        await listener.connect()
      }
      handlers.set(channel, onMessage)
      await listener.query(`LISTEN ${pg.escapeIdentifier(channel)}`)
    },
    async notify(channel, payload) {
      await knex.raw('select pg_notify(?, ?)', [channel, payload])
    },
    onListenerLost(handler) {
      lost.push(handler)
    },
    async ping() {
      await knex.raw('select 1')
    },
    async close() {
      lost.length = 0
      await listener?.end().catch(() => undefined)
      await knex.destroy()
    },
  }
}

function openPglite(config: Config, options: OpenDatabaseOptions): Database {
  let connection = {} as Knex.StaticConnectionConfig
  if (!options.inMemory) {
    const filename = path.resolve(config.dataDir, 'pglite')
    mkdirSync(filename, { recursive: true })
    connection = { filename }
  }
  const knex = knexFactory({ client: ClientPgLite, dialect: 'postgres', connection })
  const handlers = new Map<string, (payload: string) => void>()
  return {
    knex,
    kind: 'pglite',
    async listen(channel, onMessage) {
      handlers.set(channel, onMessage)
    },
    async notify(channel, payload) {
      handlers.get(channel)?.(payload)
    },
    onListenerLost() {},
    async ping() {
      await knex.raw('select 1')
    },
    async close() {
      await knex.destroy()
    },
  }
}
