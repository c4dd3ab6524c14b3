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
