import { AppError } from './app-error.js'
import type { ErrorCode } from './codes.js'

export interface Problem {
  type: string
  title: string
  status: number
  detail?: string
  errors?: Record<string, string[]>
  trace_id?: string
}

export const PROBLEM_CONTENT_TYPE = 'application/problem+json'

/** The problem `type` of a registry code: `/problems/<code with dashes>`. */
export const problemType = (code: ErrorCode): string => `/problems/${code.replaceAll('_', '-')}`

/** RFC 9457 body for an AppError; anything else is rendered as a generic 500. */
export function toProblem(err: unknown, traceId?: string): Problem {
  const e = err instanceof AppError ? err : new AppError('internal')
  const problem: Problem = { type: problemType(e.code), title: e.title, status: e.status }
  if (e.detail !== undefined) problem.detail = e.detail
  if (e.errors !== undefined) problem.errors = e.errors
  if (traceId !== undefined) problem.trace_id = traceId
  return problem
}
