import { refusedConnection, sqlState } from '../store/bounded-client.js'

/** Exit codes: 0 done, 1 the operation failed, 2 the command line or the configuration is wrong. */
export const EXIT_FAILED = 1
export const EXIT_USAGE = 2

/** A failure the operator can act on: its message is printed as it is, without a stack. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: number = EXIT_FAILED,
  ) {
    super(message)
    this.name = 'CliError'
  }
}

/**
 * A failure as the operator reads it: a connection the database turned down said as such (not
 * "retry later"), never a query error's message, which quotes the SQL.
 */
export function failureMessage(err: unknown): string {
  const refused = refusedConnection((err as { cause?: unknown } | null)?.cause)
  if (refused) return refused.message
  const code = sqlState(err)
  if (code) return `the database refused a statement (SQLSTATE ${code})`
  return err instanceof Error ? err.message : String(err)
}
