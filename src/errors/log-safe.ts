import { AppError } from './app-error.js'

/** What the logs may hold of an error: never its message, which may quote data. */
export interface LoggedError {
  type: string
  code?: string
  status?: number
  detail?: string
  stack?: string[]
  cause?: LoggedError
}

const MAX_CAUSES = 4
const MAX_FRAMES = 12

/**
 * An error as the service logs it. Foreign errors (engine, driver, network) keep their class,
 * code and stack frames but lose their message: V8 quotes values in JSON.parse and TypeError
 * messages, and drivers put row values in theirs. An AppError keeps its code and status, and its
 * detail unless tenant code wrote it. The cause chain is described the same way.
 */
export function describeError(err: unknown, depth = 0): LoggedError {
  if (!(err instanceof Error)) return { type: err === null ? 'null' : typeof err }
  const out: LoggedError = { type: err instanceof AppError ? 'AppError' : err.constructor.name || err.name }
  if (err instanceof AppError) {
    out.code = err.code
    out.status = err.status
    if (err.detail !== undefined && !err.untrustedDetail) out.detail = err.detail
  } else {
    const code = (err as { code?: unknown }).code
    if (typeof code === 'string' && /^[A-Za-z0-9_.-]{1,64}$/.test(code)) out.code = code
  }
  const frames = stackFrames(err.stack)
  if (frames.length > 0) out.stack = frames
  if (err.cause !== undefined && depth < MAX_CAUSES) out.cause = describeError(err.cause, depth + 1)
  return out
}

/**
 * The logger's `err` serializer: errors are described; a value that is already a description
 * (an error described in the runtime child) passes through; anything else keeps only its type.
 */
export function loggableError(value: unknown): LoggedError {
  if (value instanceof Error) return describeError(value)
  if (isDescribed(value)) return value
  return describeError(value)
}

function isDescribed(value: unknown): value is LoggedError {
  if (typeof value !== 'object' || value === null) return false
  const keys = Object.keys(value)
  return typeof (value as { type?: unknown }).type === 'string' && !keys.includes('message') && keys.every((k) => LOGGED_KEYS.has(k))
}

const LOGGED_KEYS = new Set(['type', 'code', 'status', 'detail', 'stack', 'cause'])

/** The `at ...` lines only: the first line of a stack repeats the message. */
function stackFrames(stack: string | undefined): string[] {
  if (stack === undefined) return []
  return stack
    .split('\n')
    .filter((line) => line.startsWith('    at '))
    .slice(0, MAX_FRAMES)
    .map((line) => line.trim())
}
