import { AppError } from '../errors/index.js'

/** What a caller is told to wait before trying again while the database does not answer. */
export const RETRY_AFTER_SECONDS = 5

// SQLSTATEs that mean "the database could not do it now", not "the request is wrong":
// 57014 statement time-out, 57P01-03 shutdown / crash / not yet accepting, 53300 too many
// connections, 55P03 lock time-out, 25P03 idle-in-transaction time-out, class 08 connection.
const SERVER_CODES = new Set(['57014', '57P01', '57P02', '57P03', '53300', '55P03', '25P03'])
// Socket-level failures of the driver (no SQLSTATE).
const SOCKET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN'])
// pg and knex report these without a code.
const DRIVER_MESSAGES = [
  'Query read timeout',
  'Connection terminated',
  'Client was closed and is not queryable',
  'Client has encountered a connection error and is not queryable',
  'Knex: Timeout acquiring a connection',
  'timeout exceeded when trying to connect',
]

export type Failure = 'server' | 'client' | undefined

/**
 * Where a database failure was decided. `server`: Postgres refused or cancelled the statement,
 * so it did not take effect. `client`: the answer never came (time-out, lost connection), so a
 * statement that was already sent may or may not have taken effect. undefined: not a failure of
 * availability (a constraint, a bug), left for the caller to translate.
 */
export function classifyFailure(err: unknown): Failure {
  if (typeof err !== 'object' || err === null) return undefined
  const { code, name } = err as { code?: unknown; name?: unknown }
  if (typeof code === 'string' && (SERVER_CODES.has(code) || code.startsWith('08'))) return 'server'
  if (typeof code === 'string' && SOCKET_CODES.has(code)) return 'client'
  if (name === 'KnexTimeoutError') return 'client'
  const message = (err as { message?: unknown }).message
  if (typeof message === 'string' && DRIVER_MESSAGES.some((m) => message.includes(m))) return 'client'
  return undefined
}

/**
 * 503 `/problems/unavailable` with Retry-After. `maybeWritten`: a write (or its COMMIT) was sent
 * and no answer came, so it may have been applied: the caller is told so rather than told it
 * failed (README, "What a caller sees during an outage").
 */
export function unavailableError(cause: unknown, maybeWritten: boolean): AppError {
  const detail = maybeWritten
    ? 'The database did not confirm the write in time: it may or may not have been applied. Read the resource before retrying.'
    : 'The database did not answer in time; nothing was changed. Retry later.'
  return new AppError('unavailable', { detail, headers: { 'Retry-After': String(RETRY_AFTER_SECONDS) }, cause })
}
