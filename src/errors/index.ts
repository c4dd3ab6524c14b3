export { AppError, FieldErrorList, ValidationError, type FieldErrors } from './app-error.js'
export { errorCodes, type ErrorCode } from './codes.js'
export { toProblem, PROBLEM_CONTENT_TYPE, type Problem } from './problem.js'
export { describeError, type LoggedError } from './log-safe.js'
