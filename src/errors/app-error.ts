import { errorCodes, type ErrorCode } from './codes.js'

export type FieldErrors = Record<string, string[]>

/** Collects messages per field, so that one 422 names every bad field at once. */
export class FieldErrorList {
  // No prototype: a field named after a caller's key (`constructor`) must not find Object.prototype's.
  readonly fields: FieldErrors = Object.create(null) as FieldErrors

  add(field: string, message: string): void {
    ;(this.fields[field] ??= []).push(message)
  }
}

export interface AppErrorOptions {
  detail?: string
  errors?: FieldErrors
  headers?: Record<string, string>
  cause?: unknown
  /**
   * `detail` holds text written by tenant code (a Reactor's error message): the caller gets it,
   * the service's logs never do, because such text may quote revealed data.
   */
  untrustedDetail?: boolean
}

/**
 * The only error type that becomes a response. `detail` is shown to the caller, so it must
 * never carry secrets, plaintext token data, SQL or stack traces.
 */
export class AppError extends Error {
  readonly code: ErrorCode
  readonly status: number
  readonly title: string
  readonly detail: string | undefined
  readonly errors: FieldErrors | undefined
  readonly headers: Record<string, string> | undefined
  readonly untrustedDetail: boolean

  constructor(code: ErrorCode, options: AppErrorOptions = {}) {
    const entry = errorCodes[code]
    super(options.detail ?? entry.title, options.cause === undefined ? undefined : { cause: options.cause })
    this.name = 'AppError'
    this.code = code
    this.status = entry.status
    this.title = entry.title
    this.detail = options.detail
    this.errors = options.errors
    this.headers = options.headers
    this.untrustedDetail = options.untrustedDetail ?? false
  }
}

export class ValidationError extends AppError {
  constructor(errors: FieldErrors, detail?: string) {
    super('validation', { errors, detail: detail ?? summarize(errors) })
  }

  /** One field, one message. */
  static field(field: string, message: string): ValidationError {
    return new ValidationError({ [field]: [message] })
  }
}

function summarize(errors: FieldErrors): string {
  const first = Object.entries(errors)[0]
  if (!first) return 'The request is invalid.'
  const [field, messages] = first
  return `${field}: ${messages[0] ?? 'is invalid'}`
}
