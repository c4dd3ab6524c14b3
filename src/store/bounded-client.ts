import { createRequire } from 'node:module'
import type { Knex } from 'knex'
import ClientPgLite from 'knex-pglite'
import { classifyFailure, unavailableError } from './unavailable.js'

const require = createRequire(import.meta.url)
const ClientPg = require('knex/lib/dialects/postgres/index.js') as typeof Knex.Client

type ClientClass = typeof Knex.Client

/** Availability failures counted per database (for metrics), by where they happened. */
export interface UnavailableCounts {
  acquire: number
  query: number
}

/** The counts live in the knex config, which transaction clients share with their parent. */
function countUnavailable(client: unknown, phase: keyof UnavailableCounts): void {
  const counts = (client as { config?: { unavailable?: UnavailableCounts } }).config?.unavailable
  if (counts) counts[phase] += 1
}

interface RawConnection {
  __knexTxId?: string
  __knex__disposed?: unknown
  connection?: { stream?: { destroy(): void } }
}

/**
 * A knex dialect whose failures of availability become 503 `unavailable` where they occur:
 * every query, inside a transaction or not, and every wait for a pooled connection passes
 * through these two methods (a transaction's client is built from this prototype too).
 * A connection whose answer never came is closed and never handed out again.
 */
function bounded(Base: ClientClass, disposable: boolean): ClientClass {
  return class BoundedClient extends Base {
    override async acquireConnection(): Promise<unknown> {
      try {
        return await super.acquireConnection()
      } catch (err) {
        // Whatever kept us from a connection (time-out, refused, reset while connecting, a login
        // turned down), nothing was sent: the server answers 503; the CLI names a refusal (`refusedConnection`).
        countUnavailable(this, 'acquire')
        throw unavailableError(err, false)
      }
    }

    override async query(connection: RawConnection, obj: unknown): Promise<unknown> {
      try {
        return await super.query(connection, obj)
      } catch (err) {
        const failure = classifyFailure(err)
        if (failure === undefined) throw err
        countUnavailable(this, 'query')
        if (failure === 'client' && disposable) dispose(connection, err)
        throw unavailableError(err, failure === 'client' && mayHaveWritten(connection, obj))
      }
    }
  }
}

export const BoundedPg = bounded(ClientPg, true)

/** The SQLSTATE a Postgres (or PGlite) error carries: five digits and capitals, never a Node code (EPIPE). */
export function sqlState(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) && /[0-9]/.test(code) ? code : undefined
}

/**
 * A connection the server turned down with a SQLSTATE no retry changes (3D000 no such database,
 * class 28 authentication): a configuration error, said as it is, not "retry later". pg's
 * message names the database or the user, never the password.
 */
export function refusedConnection(err: unknown): Error | undefined {
  const code = sqlState(err)
  if (code === undefined || classifyFailure(err) !== undefined) return undefined
  return new Error(`the database refused the connection: ${(err as Error).message} (SQLSTATE ${code}); check DATABASE_URL`, { cause: err })
}

/** PGlite boots (WASM) on its first connection: a local start-up, not a database that does not answer. */
export class BoundedPgLite extends bounded(ClientPgLite, false) {
  override async acquireConnection(): Promise<unknown> {
    await (this as unknown as { pglite?: { waitReady: Promise<void> } }).pglite?.waitReady
    return super.acquireConnection()
  }
}

/** The pool validates on acquire and drops a disposed connection; destroying the socket frees it now. */
function dispose(connection: RawConnection, err: unknown): void {
  connection.__knex__disposed = err
  connection.connection?.stream?.destroy()
}

/**
 * Whether a statement that got no answer may have taken effect. Inside a transaction only the
 * COMMIT can: anything before it is rolled back with the lost session. Outside one, every
 * statement commits on its own, so anything but a plain read may have. A transaction's own
 * control statements never write: knex sends the ROLLBACK of a nested transaction's failure with
 * the connection's transaction id already cleared, and such a failure changed nothing.
 */
export function mayHaveWritten(connection: RawConnection, obj: unknown): boolean {
  const sql = typeof obj === 'string' ? obj : ((obj as { sql?: unknown } | null)?.sql ?? '')
  if (typeof sql !== 'string') return true
  if (/^\s*(rollback|begin|savepoint|release)\b/i.test(sql)) return false
  if (connection.__knexTxId !== undefined) return /^\s*commit\b/i.test(sql)
  return !/^\s*select\b/i.test(sql)
}

/** A statement run by `runDirect`: Postgres prepares it once per connection under `name`. */
export interface DirectStatement {
  name: string
  /** With $1, $2, ... placeholders. */
  text: string
}

interface DirectClient {
  acquireConnection(): Promise<unknown>
  releaseConnection(connection: unknown): Promise<unknown>
}

interface QueryingConnection {
  query(config: { name: string; text: string; values: readonly unknown[] } | string, values?: readonly unknown[]): Promise<{ rows: Record<string, unknown>[] }>
}

/**
 * One statement on a connection of knex's pool without knex's query builder and runner, which
 * cost about twice the driver's own CPU per statement (measured: 114 against 38 µs, 25 µs once
 * prepared), for the statements on every request's path. The same bounds apply: the pool's
 * acquire time-out, the connection's statement time-out, and the same translation of
 * failures of availability into 503.
 */
export async function runDirect(knex: Knex, statement: DirectStatement, values: readonly unknown[]): Promise<Record<string, unknown>[]> {
  const client = knex.client as unknown as DirectClient
  const connection = (await client.acquireConnection()) as RawConnection & QueryingConnection
  // A pg Client (it has a backend process id); PGlite's one connection is the database itself.
  const postgres = 'processID' in connection
  try {
    const result = postgres ? await connection.query({ name: statement.name, text: statement.text, values }) : await connection.query(statement.text, values)
    return result.rows
  } catch (err) {
    const failure = classifyFailure(err)
    if (failure === undefined) throw err
    countUnavailable(client, 'query')
    if (failure === 'client' && postgres) dispose(connection, err)
    throw unavailableError(err, failure === 'client' && !/^\s*select\b/i.test(statement.text))
  } finally {
    await client.releaseConnection(connection)
  }
}
