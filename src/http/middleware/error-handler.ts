import type { Middleware } from 'koa'
import type { Logger } from 'pino'
import { AppError, describeError, PROBLEM_CONTENT_TYPE, toProblem, type ErrorCode } from '../../errors/index.js'
import type { AppState } from '../context.js'

const statusCodes: Record<number, ErrorCode> = {
  400: 'bad_request',
  401: 'unauthenticated',
  403: 'forbidden',
  404: 'not_found',
  405: 'method_not_allowed',
  413: 'payload_too_large',
  415: 'unsupported_media_type',
}

/**
 * 5xx answers a caller or its tenant's code brings about (a destination that is down or slow,
 * Reactor code that throws, loops or crowds the runtime) are logged as warnings: any private key
 * could otherwise page an operator alerting on errors once per request. Tessera's own failures
 * (a bug, the database or audit log unavailable) stay errors.
 */
const CALLERS_5XX: ReadonlySet<ErrorCode> = new Set(['destination_unreachable', 'destination_timeout', 'reactor_error', 'reactor_timeout', 'reactor_overloaded'])

/** The only place an error becomes a response; unknown errors are logged and answered as a generic 500. */
export function errorHandler(logger: Logger): Middleware<AppState> {
  return async (ctx, next) => {
    try {
      await next()
      if (ctx.status === 404 && ctx.body === undefined) throw new AppError('not_found', { detail: 'No route matches this path.' })
    } catch (err) {
      const appError = asAppError(err)
      if (appError.status >= 500) {
        // Described, not serialized: messages and Reactor text may quote the data (log-safe.ts).
        const level = CALLERS_5XX.has(appError.code) ? 'warn' : 'error'
        logger[level]({ err: describeError(appError.code === 'internal' ? err : appError), traceId: ctx.state.traceId }, 'request failed')
      }
      if (ctx.headerSent || !ctx.writable) return
      const problem = toProblem(appError, ctx.state.traceId)
      ctx.status = problem.status
      for (const [name, value] of Object.entries(appError.headers ?? {})) ctx.set(name, value)
      ctx.type = PROBLEM_CONTENT_TYPE
      ctx.body = ctx.state.wrapProblem ? ctx.state.wrapProblem(problem) : problem
    }
  }
}

/** Translates errors raised outside our code (koa, router, body parsing) without leaking their text. */
function asAppError(err: unknown): AppError {
  if (err instanceof AppError) return err
  const status = (err as { status?: unknown; expose?: unknown }).status
  const code = typeof status === 'number' ? statusCodes[status] : undefined
  if (code) return new AppError(code, { cause: err })
  return new AppError('internal', { cause: err })
}
