import { AppError } from '../errors/index.js'

/** What a caller is told to wait before trying again while the database does not answer. */
export const RETRY_AFTER_SECONDS = 5

// SQLSTATEs that mean "the database could not do it now", not "the request is wrong":
// 57014 statement time-out, 57P01-03 shutdown / crash / not yet accepting, class 53 insufficient
// resources (53100 disk full, 53200 out of memory, 53300 too many connections), 58030 I/O error,
// 55P03 lock time-out, 25P03 idle-in-transaction time-out, class 08 connection, 40P01 deadlock
// and 40001 serialization failure (the transaction was rolled back: a retry may pass). The
// statement was refused, so nothing of it took effect.
const SERVER_CODES = new Set(['57014', '57P01', '57P02', '57P03', '58030', '55P03', '25P03', '40P01', '40001'])
const SERVER_CLASSES = ['08', '53']
// In class 08 but our fault, not the connection's (a statement past 65,535 bind parameters): a
// retry cannot pass, so it is not "retry later".
const PROTOCOL_VIOLATION = '08P01'
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
  if (typeof code === 'string' && code !== PROTOCOL_VIOLATION && (SERVER_CODES.has(code) || SERVER_CLASSES.includes(code.slice(0, 2)))) return 'server'
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
  const err = new AppError('unavailable', { detail, headers: { 'Retry-After': String(RETRY_AFTER_SECONDS) }, cause })
  if (maybeWritten) uncertain.add(err)
  return err
}

const uncertain = new WeakSet<object>()

/** The error of a write that was sent and never answered: it may have committed (see `confirmedWrite`). */
export function isUncertainWrite(err: unknown): boolean {
  return typeof err === 'object' && err !== null && uncertain.has(err)
}

/**
 * Runs a write and, when its answer never came (the INSERT or COMMIT was sent, the connection
 * then failed or timed out), asks on another connection whether it landed: a write that
 * committed is reported as done, never as failed. `landed` must recognise this very write (a
 * random value it stored), not merely a row with the same id. Only "yes" settles it: "no" may
 * be a write still on its way, so the caller is then told the outcome is unknown. The check
 * gets `boundMs`, so an uncertain write answers within its own bound plus this one.
 */
export async function confirmedWrite<T>(write: () => Promise<T>, landed: () => Promise<boolean>, boundMs: number): Promise<T | undefined> {
  try {
    return await write()
  } catch (err) {
    if (!isUncertainWrite(err) || !(await within(landed(), boundMs))) throw err
    return undefined
  }
}

async function within(check: Promise<boolean>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), ms)))
  return Promise.race([check.catch(() => false), late]).finally(() => clearTimeout(timer))
}
