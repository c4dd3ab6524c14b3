import { errors as undiciErrors } from 'undici'
import { AppError } from '../errors/index.js'
import { DestinationRefusedError } from './destination-policy.js'

// undici's own time-outs, plus ETIMEDOUT (OS connect time-out, and what the node:http path uses).
const TIMEOUT_CODES = new Set(['UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'ETIMEDOUT'])
// Outbound requests undici or node:http refuse to build (invalid header name/value, length lie).
const INVALID_REQUEST_CODES = new Set([
  'UND_ERR_INVALID_ARG',
  'UND_ERR_NOT_SUPPORTED',
  'UND_ERR_REQ_CONTENT_LENGTH_MISMATCH',
  'ERR_INVALID_CHAR',
  'ERR_INVALID_HTTP_TOKEN',
  'ERR_HTTP_INVALID_HEADER_VALUE',
])
// The caller went away: nobody is left to answer, so the error is passed on untouched.
const ABORT_CODES = new Set(['UND_ERR_ABORTED', 'ABORT_ERR'])

/** The proxy does not tunnel: a destination that switches protocols (101) is refused on either path. */
export function upgradeRefusedError(cause?: unknown): AppError {
  return new AppError('destination_unreachable', { detail: 'The destination switched protocols (101); the proxy does not tunnel upgrades.', cause })
}

/** A time-out raised by the node:http path, spelled like the OS one so one mapping serves both. */
export function destinationTimeoutError(): Error {
  return Object.assign(new Error('The destination did not answer in time.'), { code: 'ETIMEDOUT' })
}

/**
 * Translates a failure of the outbound call into an AppError, keeping `cause`: policy refusal ->
 * 400 destination_refused, time-outs -> 504, any other network/TLS/DNS failure -> 502. Errors
 * without a code (programming errors) and aborts are returned unchanged.
 */
export function toForwardError(err: unknown): unknown {
  if (err instanceof AppError) return err
  if (err instanceof DestinationRefusedError) {
    return new AppError('destination_refused', { detail: err.message, cause: err })
  }
  // undici's words for a 101 nobody asked for (client-h1.js).
  if (err instanceof undiciErrors.SocketError && err.message === 'bad upgrade') return upgradeRefusedError(err)
  // undici's parser errors (a response that is not HTTP) often carry no code, yet they are the destination's.
  if (err instanceof undiciErrors.HTTPParserError) {
    return new AppError('destination_unreachable', { detail: 'The destination sent an invalid HTTP response.', cause: err })
  }
  const code = errorCode(err)
  if (code === undefined || ABORT_CODES.has(code)) return err
  if (TIMEOUT_CODES.has(code)) return new AppError('destination_timeout', { cause: err })
  if (INVALID_REQUEST_CODES.has(code)) {
    return new AppError('bad_request', { detail: 'The request cannot be forwarded as given.', cause: err })
  }
  return new AppError('destination_unreachable', { detail: `The destination could not be reached (${code}).`, cause: err })
}

function errorCode(err: unknown): string | undefined {
  if (typeof err !== 'object' || err === null) return undefined
  const code = (err as { code?: unknown }).code
  if (typeof code === 'string') return code
  // undici reports "other side closed" as UND_ERR_SOCKET; node:http as ECONNRESET. Both have codes,
  // but an AggregateError from happy-eyeballs connects carries its code on the inner errors.
  if (err instanceof AggregateError) return errorCode(err.errors[0])
  return undefined
}
